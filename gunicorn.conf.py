"""gunicorn settings for production (docs/DEPLOY.md). Each value can be overridden from the
environment (GUNICORN_*), so one file serves a small and a large machine."""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
# Requests are short (a page, a vote): sync workers in threads, a few per core.
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1))
# On SQLite one thread per worker: one transaction writes at a time, and a writer that finds the
# lock taken sleeps in SQLite's busy handler (1 to 100 ms a time), so every thread more is one
# more writer sleeping in the queue. 2,000 raters voting every 30 s on 2 cores: vote p99 124 ms
# with one thread, 343 ms with four (docs/BENCHMARKS.md, section 1.1). PostgreSQL wakes a
# waiting writer as soon as the row is free: four threads there.
_sqlite = not os.environ.get("DATABASE_URL", "sqlite:").startswith(("postgres", "pgsql"))
threads = int(os.environ.get("GUNICORN_THREADS", 1 if _sqlite else 4))
worker_class = "gthread"
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 30))
graceful_timeout = 30
keepalive = 5
# Recycle workers now and then so a slow leak never grows.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", 5000))
max_requests_jitter = 500
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-")
errorlog = "-"
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")
wsgi_app = "biasstudy.wsgi:application"
# Load the app (Django and every view, biasstudy/wsgi.py) once in the master: a worker, and each
# one that replaces a recycled worker, starts as a fork of it instead of importing it all again
# (about 2 s of CPU each, every max_requests requests). Code changes then need a restart, not a HUP.
preload_app = True
