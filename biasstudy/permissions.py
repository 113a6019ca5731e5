"""Who may do what outside the admin's own pages: Django's model permissions, as the admin applies
them, so that a staff member can do through the dashboard, the exports and the API exactly what
the admin lets them do.

Reading needs the model's view permission (its change permission is enough too, as in the admin);
writing, starting or importing needs the add or change permission of the model written. Active
superusers have every permission. Staff status is still needed for any staff page: permissions
narrow what a staff member may do, they never open a page to someone who is not staff.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse


def has_model_perms(user: AbstractBaseUser | AnonymousUser, perms: Iterable[str]) -> bool:
    """Whether `user` holds every permission of `perms` ("app_label.codename"); a view
    permission is also held through the change permission of the same model."""
    return all(user.has_perm(perm) or user.has_perm(_change_for_view(perm)) for perm in perms)


def _change_for_view(perm: str) -> str:
    app_label, _, codename = perm.partition(".")
    if codename.startswith("view_"):
        return f"{app_label}.change_{codename.removeprefix('view_')}"
    return perm


def model_permissions_required(*perms: str) -> Callable:
    """A function view's decorator, placed under `staff_member_required`: a staff member without
    every one of `perms` gets 403 (raised here, so Django's 403 page answers)."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def checked(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not has_model_perms(request.user, perms):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return checked

    return decorator
