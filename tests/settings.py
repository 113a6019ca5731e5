"""Settings for the test suite: the app's own settings with test-only environment defaults."""

import os

# A developer's .env (scripts/start.sh) must not change what the tests see.
os.environ["BIASSTUDY_ENV_FILE"] = os.devnull
os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-secret-key-not-for-production-0123456789")
os.environ.setdefault("DJANGO_SECURE_COOKIES", "0")
# The suite enters and votes far faster than a person; the limit tests set their own rates.
os.environ.setdefault("RATER_ENTRY_RATE", "100000/minute")
os.environ.setdefault("RATER_VOTE_RATE", "100000/minute")
# One process, so each process's own memory is cache enough for the API's throttles (the rater
# pages' limits count in the database; the live tests set CACHE_URL to "" as production has it).
os.environ.setdefault("CACHE_URL", "locmem://")

from biasstudy.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast personas
# Pages name static files as they are, with no collectstatic manifest (test_reliability_static
# runs the production storage).
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
