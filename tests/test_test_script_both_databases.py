"""scripts/test.sh runs the suite on both databases whatever the first run found, reports each,
and fails if either failed (under `set -e` a failing SQLite run ended it, and the PostgreSQL run
never happened, without a word). Driven here with a stand-in pytest, since test.sh itself
installs packages first."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Records each run and fails on the database named by FAIL_ON ("sqlite" or "postgres").
STAND_IN = """#!/usr/bin/env bash
db=sqlite; [ -n "${DATABASE_URL:-}" ] && db=postgres
echo "$db $*" >> "$CALLS"
[ "$db" != "$FAIL_ON" ]
"""


def run_suite(tmp_path: Path, fail_on: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    pytest_stand_in = venv / "bin" / "pytest"
    pytest_stand_in.write_text(STAND_IN)
    pytest_stand_in.chmod(0o755)
    calls = tmp_path / "calls"
    script = 'set -euo pipefail; source scripts/lib.sh; suite_on_both_databases -q tests/x.py; echo "went on"'
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "VENV": str(venv),
            "CALLS": str(calls),
            "FAIL_ON": fail_on,
            "TEST_DATABASE_URL": "postgres://stand-in/none",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, calls.read_text().splitlines()


@pytest.mark.parametrize(
    ("fail_on", "sqlite", "postgres"),
    [
        ("sqlite", "FAILED (pytest exit status 1)", "passed"),
        ("postgres", "passed", "FAILED (pytest exit status 1)"),
    ],
)
def test_a_failing_half_does_not_stop_the_other_and_fails_the_script(tmp_path, fail_on, sqlite, postgres):
    done, calls = run_suite(tmp_path, fail_on)
    assert calls == ["sqlite -q tests/x.py", "postgres -q tests/x.py"]
    assert done.returncode != 0 and "went on" not in done.stdout
    assert f"Test suite on SQLite: {sqlite}" in done.stderr
    assert f"Test suite on PostgreSQL: {postgres}" in done.stderr


def test_both_passing_is_a_pass(tmp_path):
    done, calls = run_suite(tmp_path, "neither")
    assert done.returncode == 0 and "went on" in done.stdout and len(calls) == 2
    assert "Test suite on SQLite: passed" in done.stderr and "Test suite on PostgreSQL: passed" in done.stderr


def test_test_sh_runs_the_suite_this_way():
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert script.rstrip().endswith('suite_on_both_databases -q --durations=30 "$@"')
