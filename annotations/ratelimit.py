"""A small fixed-window request limiter for the rater pages' entry (votes are limited by
annotations.assignment, from the rater's stored votes).

The count is a row of the database (`RequestCount`), which every gunicorn worker and web host
shares: a conditional UPDATE adds one only while the count is under the limit, and its row
count says whether this request got a place, so the limit holds exactly with any number of
workers (the database settles the race: a row lock on PostgreSQL, the write lock on SQLite).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from annotations.models import RequestCount


def hit(scope: str, key: str, *, rate: tuple[int, int], now: float | None = None) -> int | None:
    """Count one request of `key` in `scope`. None while under `rate` = (requests, seconds),
    else the seconds until the window ends (for Retry-After); a refused request is not counted."""
    limit, period = rate
    now = time.time() if now is None else now
    start = int(now // period) * period
    retry_after = max(1, int(start + period - now + 0.999))
    with transaction.atomic():  # one commit for its few statements (one write lock on SQLite)
        return _count(scope, key[:200], limit=limit, start=start, period=period, now=now, retry_after=retry_after)


def _count(scope: str, key: str, *, limit: int, start: int, period: int, now: float, retry_after: int) -> int | None:
    counter = RequestCount.objects.filter(scope=scope, key=key, window_start=start)
    if counter.filter(count__lt=limit).update(count=F("count") + 1):
        return None
    if limit < 1:
        return retry_after
    try:
        with transaction.atomic():
            RequestCount.objects.create(scope=scope, key=key, window_start=start, window_end=start + period, count=1)
    except IntegrityError:  # the window's counter is there: full, or made by a request just now
        return None if counter.filter(count__lt=limit).update(count=F("count") + 1) else retry_after
    # A new window has begun for this client: the counters of windows that have ended go.
    RequestCount.objects.filter(window_end__lte=now).delete()
    return None


def client_address(request) -> str:
    """The client's address. Behind our proxy (DJANGO_BEHIND_PROXY) it is the last address the
    proxy appended to X-Forwarded-For; anything before it came from the client and is not trusted."""
    if settings.BEHIND_PROXY:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR", "")
