"""Settings for biasstudy, read from the environment (see docs/DEPLOY.md for every variable).

Defaults are for a laptop: SQLite in the checkout, the database-backed task queue, the local
judge model. Outside DEBUG the secure defaults hold and SECRET_KEY must be given.
"""

import os
import re
from pathlib import Path

import dj_database_url

from biasstudy.env import EnvError, cache_from_url, env_bool, env_int, env_list, env_rate, env_str, load_env_file

BASE_DIR = Path(__file__).resolve().parent.parent
# scripts/start.sh writes a .env for a laptop (DEBUG on, a random key). A process given its secret
# key by the environment, as every deployment is (docs/DEPLOY.md), is configured by the
# environment alone: a .env left in a deployment's checkout once turned DEBUG on there.
if "DJANGO_SECRET_KEY" not in os.environ:
    load_env_file(env_str("BIASSTUDY_ENV_FILE", str(BASE_DIR / ".env")))

DEBUG = env_bool("DJANGO_DEBUG", False)

_DEV_SECRET_KEY = "django-insecure-dev-only-never-use-in-production"  # noqa: S105 - refused outside DEBUG
SECRET_KEY = env_str("DJANGO_SECRET_KEY", _DEV_SECRET_KEY if DEBUG else None)
if not DEBUG:
    # An empty key makes every page fail; a blank or short one lets anyone sign rater cookies.
    # The bar is Django's own (check --deploy, security.W009): 50 characters, 5 different ones.
    if SECRET_KEY == _DEV_SECRET_KEY:
        raise EnvError("DJANGO_SECRET_KEY must be set to a real secret when DJANGO_DEBUG is off")
    if len(SECRET_KEY.strip()) < 50 or len(set(SECRET_KEY)) < 5:
        raise EnvError(
            "DJANGO_SECRET_KEY is too weak: give at least 50 random characters when DJANGO_DEBUG is off "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
# (env_str above fails with "DJANGO_SECRET_KEY is required" outside DEBUG; for a laptop,
# scripts/start.sh writes a .env with DJANGO_DEBUG=1 and a random key.)

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "csp",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_tasks",
    "django_tasks_db",
    "annotations",
    "perturbations",
    "judges",
    "vote_imports",
    "analysis",
    "api",
    "prolific",
]

MIDDLEWARE = [
    "biasstudy.health.HealthCheckHostMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before CSRF: it sees the CSRF cookie set, on the rater pages a study lets MTurk frame.
    "annotations.middleware.FrameCookiesMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "biasstudy.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "biasstudy.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
        # A kept connection is checked before a request uses it, so a database restart costs
        # no failed request (only meaningful with DATABASE_CONN_MAX_AGE > 0).
        conn_health_checks=env_bool("DATABASE_CONN_HEALTH_CHECKS", True),
    )
}
# PostgreSQL: parameters bound on the server, so that psycopg prepares a statement the fifth
# time a connection runs it and PostgreSQL stops planning it again. Turn it off behind a pooler
# in transaction mode that cannot keep prepared statements (docs/DEPLOY.md).
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DATABASE_PREPARED_STATEMENTS", True):
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Many raters vote at once: WAL lets readers go on while one writer commits, IMMEDIATE
    # takes the write lock at BEGIN so two transactions never deadlock upgrading a read lock
    # (the rater path's claims rely on it: one writer at a time), and the timeout makes a
    # writer wait for the lock instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env_int("DATABASE_SQLITE_TIMEOUT", 30),
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": env_str("SQLITE_TEST_NAME", "") or None}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# collectstatic writes each file under a name with its hash, gzipped (and brotli-compressed when
# the brotli package is there); whitenoise serves those with a year-long max-age. Outside DEBUG
# pages need that manifest: run collectstatic before starting the app.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGIN_URL = "admin:login"

# Sessions (staff only: raters are known by a signed cookie, annotations/pages.py) are Django's
# database sessions.

# Background work goes through Django's Tasks interface; the database-backed queue needs no
# extra service. TASKS_BACKEND selects another backend (e.g. the RQ one) by settings alone.
TASKS = {
    "default": {
        "BACKEND": env_str("TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}
# A running judge run whose worker has not written for this many seconds is taken for dead
# and may be resumed (the worker beats every half second while it runs).
JUDGE_RUN_STALE_SECONDS = env_int("JUDGE_RUN_STALE_SECONDS", 60)
# Replies a judge run's worker received but could not store before the database outage made its
# run stale are kept here, and stored as cached replies by the worker that resumes the run (so
# it does not ask for them again): with workers on several hosts, make it one folder they mount.
JUDGE_RUN_REPLIES_DIR = Path(env_str("JUDGE_RUN_REPLIES_DIR", str(BASE_DIR / "var" / "judge-replies")))

# Study files uploaded in the admin wait here between the preview and the import (named by a
# random id inside a signed token; removed once imported). The task worker reads them, so it
# must see the same folder as the web server. The size limit is the API's (API_IMPORT_MAX_MB);
# studies with more questions than STUDY_UPLOAD_BACKGROUND_QUESTIONS are written by the task
# worker, with progress.
STUDY_UPLOAD_DIR = Path(env_str("STUDY_UPLOAD_DIR", str(BASE_DIR / "var" / "uploads")))
STUDY_UPLOAD_MAX_AGE_SECONDS = env_int("STUDY_UPLOAD_MAX_AGE_SECONDS", 24 * 3600)
STUDY_UPLOAD_BACKGROUND_QUESTIONS = env_int("STUDY_UPLOAD_BACKGROUND_QUESTIONS", 500)
# A study with more votes than this has its report computed again by the task worker after new
# votes (pages and the API show the last one meanwhile, marked as updating); up to it, in the
# request (about 1.2 s of CPU at 100,000 votes: docs/BENCHMARKS.md).
ANALYSIS_BACKGROUND_VOTES = env_int("ANALYSIS_BACKGROUND_VOTES", 200_000)

# Prolific's API (the prolific app). The researcher's token is read from the environment
# (PROLIFIC_API_TOKEN) at each call, never from settings nor the database.
PROLIFIC_API_URL = env_str("PROLIFIC_API_URL", "https://api.prolific.com").rstrip("/")
PROLIFIC_TIMEOUT_SECONDS = env_int("PROLIFIC_TIMEOUT_SECONDS", 30)
# Tries of a call Prolific answers 429 (its wallet contention), with backoff: bounded.
PROLIFIC_MAX_TRIES = env_int("PROLIFIC_MAX_TRIES", 5)
# How often the worker keeps a running Prolific study's submissions in step.
PROLIFIC_SYNC_SECONDS = env_int("PROLIFIC_SYNC_SECONDS", 120)

# The Redis queue (workers: judges.tasks.worker_command()). Its app, with admin pages that talk
# to Redis, is installed only when Redis is the queue. Every `rqworker` runs our worker class:
# RQ's, with its maintenance every 10 s (a dead worker's scheduler lock is taken over within
# about a minute instead of 10; biasstudy/rq_worker.py).
RQ_QUEUES = {"default": {"URL": env_str("REDIS_URL", "redis://127.0.0.1:6379/0"), "DEFAULT_TIMEOUT": 3600}}
RQ = {"WORKER_CLASS": "biasstudy.rq_worker.Worker"}
if TASKS["default"]["BACKEND"] == "django_tasks_rq.RQBackend":
    INSTALLED_APPS.append("django_rq")
# Its dashboard is registered by judges/admin.py, for superusers and the holders of its own
# permission only (biasstudy/rq_admin.py), not for every staff member as django-rq registers it.
RQ_SHOW_ADMIN_LINK = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Staff, with the model permissions of what a view reads or writes; a view that declares
    # none is for superusers only (api/permissions.py).
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser", "api.permissions.ModelPermissions"],
    "DEFAULT_PARSER_CLASSES": [
        "api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.TokenRateThrottle"],
    "DEFAULT_SCHEMA_CLASS": "api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "api.exceptions.api_exception_handler",
}
# The largest study file (or unpacked chen2024 zip) the API's import accepts.
API_IMPORT_MAX_MB = env_int("API_IMPORT_MAX_MB", 100)
# Requests per token (or per staff session) and period: "<n>/second|minute|hour|day".
API_THROTTLE_RATE = env_str("API_THROTTLE_RATE", "1200/minute")
if not re.fullmatch(r"[1-9][0-9]*/(second|minute|hour|day)", API_THROTTLE_RATE):
    raise EnvError(f"API_THROTTLE_RATE={API_THROTTLE_RATE!r} is not like 1200/minute (second, minute, hour or day)")

# The rater pages' own limits, per client address for entering a study and per rater for
# votes ("<n>/second|minute|hour"); over them the rater gets a 429 page with Retry-After.
# They count in the database (annotations.ratelimit, from the rater's votes for votes), which
# every web instance shares.
RATER_ENTRY_RATE = env_rate("RATER_ENTRY_RATE", "30/minute")
RATER_VOTE_RATE = env_rate("RATER_VOTE_RATE", "60/minute")
# Seconds the done page shows a Prolific rater their completion code before it takes them back
# to Prolific (they can go at once by its link, or stay): long enough to read or copy the code,
# which they need when the way back fails.
BIASSTUDY_PLATFORM_RETURN_SECONDS = env_int("BIASSTUDY_PLATFORM_RETURN_SECONDS", 10)
# The API's throttles count in the default cache. Without CACHE_URL it is a table of the
# database (created by `migrate`), which every gunicorn worker and web host on that database share.
CACHES = {
    "default": cache_from_url(env_str("CACHE_URL", "")),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "biasstudy API",
    "DESCRIPTION": "Studies, items, votes, judge runs and metrics of judge-bias studies.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAdminUser"],
    "SCHEMA_PATH_PREFIX": r"/api/v[0-9]+",  # tags: studies, votes, judges...
    # The documentation page's JavaScript and CSS come from drf-spectacular-sidecar, served
    # with our own static files: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Deep links put a link inside each operation's expand button (nested controls a screen
    # reader cannot reach); the page works the same without them.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "COMPONENT_SPLIT_REQUEST": True,
    # Several models have a "status" with its own choices: one named enum each in the schema.
    "ENUM_NAME_OVERRIDES": {
        "StudyStatusEnum": "annotations.models.Study.Status",
        "RunStatusEnum": "judges.models.JudgeRun.Status",
    },
}

# Content-Security-Policy on every page, in development too, so that what works here works in
# production: scripts only from our own static files (htmx is vendored), no inline script,
# nothing loaded from another origin. Inline style attributes stay allowed (the admin uses them).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": [
            "'self'",
            "https://app.prolific.com",
            "https://www.mturk.com",
            "https://workersandbox.mturk.com",
        ],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    }
}

# Behind a TLS-terminating proxy (docs/DEPLOY.md): HSTS, redirect to HTTPS, trust its header.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
BEHIND_PROXY = env_bool("DJANGO_BEHIND_PROXY", False)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# A load balancer checks /health/ over plain HTTP on each backend: no redirect for it.
SECURE_REDIRECT_EXEMPT = [r"^health/$"]

# Secure defaults outside DEBUG (production settings are documented in docs/DEPLOY.md).
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# The sites that may frame the rater pages of a study with "allow MTurk frame" on (MTurk shows an
# ExternalQuestion in an iframe on these); every other page, and every other study, stays DENY
# and frame-ancestors 'none'. The tests set a loopback origin.
BIASSTUDY_MTURK_FRAME_ANCESTORS = env_list(
    "BIASSTUDY_MTURK_FRAME_ANCESTORS",
    ["https://worker.mturk.com", "https://workersandbox.mturk.com", "https://www.mturk.com"],
)
if not BIASSTUDY_MTURK_FRAME_ANCESTORS:  # an empty frame-ancestors would let any site frame the study
    raise EnvError("BIASSTUDY_MTURK_FRAME_ANCESTORS must name at least one origin")
for _origin in BIASSTUDY_MTURK_FRAME_ANCESTORS:
    if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?", _origin):
        raise EnvError(f"BIASSTUDY_MTURK_FRAME_ANCESTORS: {_origin!r} is not an origin like https://worker.mturk.com")

# The identities the `identity` perturbation kind has an answer's author state, each written as it
# follows "As" ("a nurse", "an immigrant"). Empty: perturbations.rules.DEFAULT_IDENTITIES.
BIASSTUDY_IDENTITY_MARKERS = env_list("BIASSTUDY_IDENTITY_MARKERS", [])

_LOG_LEVEL = env_str("DJANGO_LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": _LOG_LEVEL},
    "loggers": {
        # Django's own configuration gives "django" a console handler of its own (with DEBUG on)
        # and the records also reach the root's: every line was printed twice. Its records go to
        # the root's handler alone (its other one mails ADMINS, which we do not set).
        "django": {"handlers": [], "level": _LOG_LEVEL},
        "django.db.backends": {"level": "INFO"},
    },
}
