"""A log record is printed once: with DEBUG on, every `django.*` line came twice (Django's own
console handler on "django", and the root's handler that its records also reach)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

EMIT = """
import django, logging
django.setup()
logging.getLogger("django.request").warning("marker from django.request")
logging.getLogger("django.db.backends").info("marker from django.db.backends")
logging.getLogger("analysis.tasks").info("marker from our own code")
"""


@pytest.mark.parametrize("debug", ["1", "0"])
def test_each_log_record_is_printed_once(debug):
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "biasstudy.settings",  # the real settings, as the app runs
        "DJANGO_DEBUG": debug,
        "DJANGO_SECRET_KEY": "a-key-for-this-test-only-" + "x7Q2" * 10,
    }
    done = subprocess.run(
        [sys.executable, "-c", EMIT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    for source in ("django.request", "django.db.backends", "our own code"):
        assert done.stderr.count(f"marker from {source}") == 1, done.stderr
