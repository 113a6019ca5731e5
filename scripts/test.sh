#!/usr/bin/env bash
# Install what the tests need (Debian's chromium with a colour emoji font, postgresql; the Python
# packages; axe-core from npm for the accessibility tests) and run the
# whole suite: lint, then all tests on SQLite, then again on PostgreSQL (TEST_DATABASE_URL, or a
# local Debian cluster started on 127.0.0.1 when we may install and start one). Both runs happen
# whatever the first found; each is reported at the end, and the script fails if either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_build_tools
# Without an emoji font Chromium draws a box where an answer has an emoji (the screenshots, the
# pages the browser tests look at).
ensure_apt chromium fonts-noto-color-emoji redis-server
ensure_venv
pip_install requirements.txt requirements-test.txt
ensure_node_tools

log "Lint (ruff) and the apps' import contracts (import-linter, pyproject.toml)"
"$VENV/bin/ruff" check .
"$VENV/bin/lint-imports" --no-cache

# --durations: the slowest tests of each run, so that CI's log shows where the suite's time goes.
suite_on_both_databases -q --durations=30 "$@"
