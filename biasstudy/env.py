"""Typed readers for settings that come from the environment.

Each reader fails loudly, naming the variable, when a value is present but malformed: a typo in
production must stop the start-up, not silently fall back to a default.
"""

from __future__ import annotations

import os
import re

_RATE = re.compile(r"([1-9][0-9]*)/(second|minute|hour|day)")
_PERIOD_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


class EnvError(ValueError):
    pass


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise EnvError(f"environment variable {name} is required but not set")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise EnvError(f"environment variable {name}={value!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise EnvError(f"environment variable {name}={value!r} is not an integer") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def load_env_file(path: os.PathLike | str) -> None:
    """Read KEY=VALUE lines from a local `.env` file into the environment, never overriding a
    variable that is set already. scripts/start.sh writes one for a laptop (DEBUG on, a random
    secret key), so that every `manage.py` command in that checkout sees the same settings as
    the running app. Production sets real environment variables and has no such file.
    """
    try:
        lines = open(path, encoding="utf-8").read().splitlines()  # noqa: SIM115
    except FileNotFoundError:
        return
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip().isidentifier():
            raise EnvError(f"{path}, line {number}: expected KEY=VALUE")
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))


def env_rate(name: str, default: str) -> tuple[int, int]:
    """A rate like "30/minute" as (requests, period in seconds)."""
    value = os.environ.get(name, default).strip()
    match = _RATE.fullmatch(value)
    if not match:
        raise EnvError(
            f"environment variable {name}={value!r} is not a rate like 30/minute (second, minute, hour, day)"
        )
    return int(match.group(1)), _PERIOD_SECONDS[match.group(2)]


CACHE_TABLE = "biasstudy_cache"


def cache_from_url(url: str) -> dict:
    """The default cache from CACHE_URL: empty for a table of the database (shared by every
    process on that database), redis://… or rediss://… for Redis, locmem:// for each process's
    own memory (right for a single process only)."""
    scheme = url.partition("://")[0]
    if not url:
        # Django culls a third of the entries once there are MAX_ENTRIES (300 by default), live
        # throttle histories included: room for ten thousand API clients in the same minute.
        return {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": CACHE_TABLE,
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    if scheme in ("redis", "rediss"):
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    if url == "locmem://":
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    raise EnvError(f"environment variable CACHE_URL={url!r} is not redis://… or locmem://")
