"""The core app (annotations) stands alone: its models load and its migrations run with none of
the other apps installed (judges, vote_imports, analysis, perturbations, api), as a project that wants only the
study's items and votes would install it. Run in a subprocess, with a minimal settings module of
its own and a database of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SETTINGS = """
SECRET_KEY = "core-app-alone-test-only-not-a-secret-0123456789abcdef"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "annotations"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DB}}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
"""

CHECK = """
import django
django.setup()
from django.apps import apps
from django.core.management import call_command
assert not any(app in {"judges", "vote_imports", "analysis", "perturbations", "api"} for app in apps.app_configs)
call_command("check", "annotations", fail_level="ERROR")
from annotations.models import Vote
print("ok", Vote._meta.db_table)
"""

MIGRATE = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from annotations.models import Study
Study.objects.create(title="Alone", slug=f"alone-{Study.objects.count()}")
print("ok", Study.objects.count())
"""


def _alone(tmp_path: Path, script: str) -> list[str]:
    """Run `script` with the minimal settings; its printed words."""
    (tmp_path / "alone_settings.py").write_text(f"DB = {str(tmp_path / 'db.sqlite3')!r}\n" + SETTINGS)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "alone_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()[-1].split()  # after what `check` prints


def test_the_core_apps_models_load_and_pass_the_checks_without_the_other_apps(tmp_path):
    assert _alone(tmp_path, CHECK) == ["ok", "annotations_vote"]


def test_the_core_apps_migrations_run_without_the_other_apps(tmp_path):
    assert _alone(tmp_path, MIGRATE) == ["ok", "1"]
    assert _alone(tmp_path, MIGRATE) == ["ok", "2"], "and again, on the database it made"
