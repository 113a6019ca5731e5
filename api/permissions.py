"""The API's permission class, the default of every view (settings.REST_FRAMEWORK, after
IsAdminUser): Django's model permissions, as the admin applies them (biasstudy.permissions).

A view says what each method needs in `model_permissions` ({"GET": (...), "POST": (...)}; "GET"
stands for HEAD and OPTIONS too). A view that says nothing but has a `queryset` needs its model's
view permission to read and its add permission to POST (change for PUT and PATCH, delete for
DELETE). Anything else, a new view that declares nothing included, is for superusers only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.permissions import SAFE_METHODS, BasePermission

from biasstudy.permissions import has_model_perms

if TYPE_CHECKING:  # DRF's views module reads this one's class from the settings while it loads
    from rest_framework.request import Request
    from rest_framework.views import APIView

ACTIONS = {"GET": "view", "POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}


def required_permissions(view: APIView, method: str) -> tuple[str, ...] | None:
    """The permissions `method` on `view` needs, or None when the view does not say (superusers only)."""
    method = "GET" if method in SAFE_METHODS else method
    declared = getattr(view, "model_permissions", None)
    if declared is not None:
        return declared.get(method)
    # The class attribute, not get_queryset(): that may look up the URL's study, and a staff
    # member without the permission learns nothing, not even whether the study exists.
    queryset = getattr(view, "queryset", None)
    if queryset is None or method not in ACTIONS:
        return None
    opts = queryset.model._meta
    return (f"{opts.app_label}.{ACTIONS[method]}_{opts.model_name}",)


class ModelPermissions(BasePermission):
    message = "You do not have the permission this needs (ask an administrator for it in the admin's Users)."

    def has_permission(self, request: Request, view: APIView) -> bool:
        perms = required_permissions(view, request.method)
        if perms is None:
            return bool(request.user and request.user.is_active and request.user.is_superuser)
        return has_model_perms(request.user, perms)
