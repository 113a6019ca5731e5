"""The Redis queue's dashboard (django-rq's admin pages, installed with the RQ backend only), for
superusers and staff given django-rq's own permission, "Django-RQ | Access admin page"
(`django_rq.admin`). django-rq lets any staff member use it, and its pages empty queues, delete,
requeue and stop jobs: the queue holds every judge run and import, so that is no staff-wide right.

Registered by judges/admin.py in django-rq's place (settings.RQ_SHOW_ADMIN_LINK is off).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern
from django_rq.admin import QueueAdmin

PERMISSION = "django_rq.admin"


def _permission_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A signed-in user without the permission gets 403. Anyone else goes on to django-rq's own
    check: the admin's login for its pages, RQ_API_TOKEN for stats.json and metrics."""

    @wraps(view)
    def checked(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.user.is_authenticated and not request.user.has_perm(PERMISSION):
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return checked


class PermittedQueueAdmin(QueueAdmin):
    def get_urls(self) -> list[URLPattern]:
        return [
            URLPattern(url.pattern, _permission_required(url.callback), url.default_args, url.name)
            for url in super().get_urls()
        ]
