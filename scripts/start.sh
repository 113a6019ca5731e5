#!/usr/bin/env bash
# Install everything, migrate, load the demo study, print a staff login, and serve the app at
# http://127.0.0.1:8000 with the background task worker running. Ctrl-C or SIGTERM stops both.
# BIASSTUDY_ADDR=HOST:PORT serves elsewhere (when port 8000 is taken).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_build_tools
ensure_venv
pip_install requirements.txt

# Local settings for this checkout, read by every manage.py command (biasstudy/env.py).
if [ ! -f .env ]; then
  log "Writing .env (DEBUG on, a random secret key) for this laptop"
  printf 'DJANGO_DEBUG=1\nDJANGO_SECRET_KEY=%s\n' "$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')" > .env
fi
log "Preparing the database"
"$PY" manage.py migrate --no-input -v0
"$PY" manage.py load_demo
"$PY" manage.py create_demo_judges
"$PY" manage.py ensure_staff

log "Starting the task worker"
start_together "$PY" manage.py db_worker --queue-name "*"

addr="${BIASSTUDY_ADDR:-127.0.0.1:8000}"
log "Serving http://$addr  (admin: http://$addr/admin/, raters: http://$addr/s/demo/)"
start_together "$PY" manage.py runserver "$addr"
# Ctrl-C or SIGTERM stops the server and the worker (and what they started); so does either
# of them ending.
run_together
