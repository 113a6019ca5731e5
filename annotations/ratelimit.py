"""A small fixed-window request limiter on Django's cache, for the rater pages' entry and vote.

The count lives in the default cache: by default a table of the database with an atomic
increment (biasstudy/cache.py), which every gunicorn worker and web host shares, or Redis
(CACHE_URL). With a per-process cache (locmem://) it would hold per process only.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache


class Unavailable(Exception):
    """The cache that holds the counts cannot be reached (e.g. Redis is down)."""


def hit(scope: str, key: str, *, rate: tuple[int, int], now: float | None = None) -> int | None:
    """Count one request of `key` in `scope`. None while under `rate` = (requests, seconds),
    else the seconds until the window ends (for Retry-After). Raises Unavailable when the
    cache fails: the caller asks the client to try again rather than letting it through."""
    try:
        return _hit(scope, key, rate=rate, now=now)
    except Exception as exc:  # noqa: BLE001 - whatever the cache's client raises
        raise Unavailable(f"{type(exc).__name__}: {exc}") from exc


def _hit(scope: str, key: str, *, rate: tuple[int, int], now: float | None) -> int | None:
    limit, period = rate
    now = time.time() if now is None else now
    window = int(now // period)
    name = f"ratelimit:{scope}:{key}:{window}"
    # add() creates the counter atomically on the first hit of the window; incr() is atomic in
    # the shared caches (Redis, memcached) and under a lock in the local-memory one.
    if cache.add(name, 1, timeout=period + 1):
        count = 1
    else:
        try:
            count = cache.incr(name)
        except ValueError:  # expired between add() and incr()
            cache.add(name, 1, timeout=period + 1)
            count = 1
    if count <= limit:
        return None
    return max(1, int((window + 1) * period - now + 0.999))


def client_address(request) -> str:
    """The client's address. Behind our proxy (DJANGO_BEHIND_PROXY) it is the last address the
    proxy appended to X-Forwarded-For; anything before it came from the client and is not trusted."""
    if settings.BEHIND_PROXY:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR", "")
