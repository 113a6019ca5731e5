"""The environment every benchmark runs the project under: production settings (DEBUG off,
so no query is kept in memory), a throw-away secret, quiet logs, no .env file read."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bench_env(database_url: str, *, settings: str = "bench.settings", **extra: str) -> dict[str, str]:
    """os.environ plus the benchmark's variables (and `extra`), for a Django process."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings,
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),  # production settings refuse keys under 50 characters
        "DJANGO_LOG_LEVEL": "WARNING",
        "BIASSTUDY_ENV_FILE": "/nonexistent",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


def setup_django(database_url: str, *, settings: str = "bench.settings", **extra: str) -> None:
    """Set up Django in this process on that database and migrate it."""
    os.environ.update(bench_env(database_url, settings=settings, **extra))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
