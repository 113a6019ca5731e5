"""scripts/start.sh stops everything it started on Ctrl-C or SIGTERM (the server and the task
worker, with what they started: runserver's autoreloader runs the server in a child). The
process-group handling (scripts/lib.sh: start_together, run_together) is driven here on stand-in
processes shaped like them, since start.sh itself installs packages first."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A stand-in for runserver or db_worker: it starts a child (as the autoreloader does), writes
# both pids, and sleeps.
STAND_IN = (
    "import os, subprocess, sys, time; "
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}'); time.sleep(float(sys.argv[2]))"
)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has stopped; only its exit status is left to collect


def start_driver(tmp_path: Path, lifetimes=(600, 600)) -> tuple[subprocess.Popen, list[Path]]:
    files = [tmp_path / f"pids-{i}" for i in range(len(lifetimes))]
    starts = "\n".join(
        f'start_together "{sys.executable}" -c "{STAND_IN}" "{f}" {life}'
        for f, life in zip(files, lifetimes, strict=True)
    )
    driver = tmp_path / "driver.sh"
    driver.write_text(f"set -euo pipefail\ncd {ROOT}\nsource scripts/lib.sh\n{starts}\nrun_together\n")
    process = subprocess.Popen(["bash", str(driver)], start_new_session=True, preexec_fn=default_sigint)
    return process, files


def default_sigint() -> None:
    """SIGINT as a terminal's Ctrl-C finds start.sh. A command started with `&` by a shell that
    is not interactive (`nohup ./scripts/test.sh &`, a scheduler, a CI wrapper) ignores SIGINT, and
    so would this driver, inheriting it: bash cannot trap a signal ignored when it started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def pids_of(files: list[Path], timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(f.exists() and len(f.read_text().split()) == 2 for f in files):
            return [int(p) for f in files for p in f.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the stand-ins did not start")


def all_gone(pids: list[int], timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_the_script_stops_every_process_it_started(tmp_path, sig, code):
    process, files = start_driver(tmp_path)
    pids = []
    try:
        pids = pids_of(files)
        assert all(alive(p) for p in pids)
        process.send_signal(sig)
        assert process.wait(timeout=20) == code
        assert all_gone(pids), [p for p in pids if alive(p)]
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.kill()


def test_the_signal_cases_pass_when_the_tests_run_with_sigint_ignored(tmp_path):
    """As in a job started with `&` by a shell that is not interactive: the SIGINT case timed out."""
    command = 'trap "" INT; exec "$0" -m pytest -q -p no:cacheprovider "$1" -k a_signal_to_the_script'
    done = subprocess.run(
        ["bash", "-c", command, sys.executable, str(Path(__file__))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def test_when_one_ends_the_other_is_stopped_too(tmp_path):
    process, files = start_driver(tmp_path, lifetimes=(1, 600))
    pids = []
    try:
        pids = pids_of(files)
        assert process.wait(timeout=20) == 0
        assert all_gone(pids), [p for p in pids if alive(p)]
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.kill()


def test_start_sh_runs_the_server_and_the_worker_this_way():
    script = (ROOT / "scripts" / "start.sh").read_text()
    assert 'start_together "$PY" manage.py db_worker' in script
    assert 'start_together "$PY" manage.py runserver' in script
    assert script.rstrip().endswith("run_together")
