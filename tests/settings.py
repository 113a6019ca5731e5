"""Settings for the test suite: the app's own settings with test-only environment defaults."""

import os

# A developer's .env (scripts/start.sh) must not change what the tests see.
os.environ["BIASSTUDY_ENV_FILE"] = os.devnull
os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-secret-key-not-for-production-0123456789")
os.environ.setdefault("DJANGO_SECURE_COOKIES", "0")
# The suite enters and votes far faster than a person; the limit tests set their own rates.
os.environ.setdefault("RATER_ENTRY_RATE", "100000/minute")
os.environ.setdefault("RATER_VOTE_RATE", "100000/minute")

from biasstudy.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast personas
TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
