"""API keys in the admin: made, listed by user and revoked here, never shown but once.

DRF's own token admin lists every key and shows one on its change page, to anyone holding "view"
permissions: it is replaced by `ApiKeyAdmin`, which shows a key only on the page that answers its
creation. A superuser may make a key for any user without one; anyone else holding "add API key"
only for themselves (a key for another user would let them act as that user). Deleting a key
revokes it. Deleting a user lists what goes with them, a key by its str, which for DRF's Token
is the key itself: `UserAdmin` here names it without it.
"""

from __future__ import annotations

import rest_framework.authtoken.admin  # noqa: F401 - registers DRF's token admin, unregistered here
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import Token, TokenProxy

from api.models import ApiKey

admin.site.unregister(TokenProxy)


@admin.register(ApiKey)
class ApiKeyAdmin(TokenAdmin):
    list_display = ("user", "created")
    readonly_fields = ("created",)
    search_fields = ("user__username",)

    def get_fields(self, request: HttpRequest, obj=None):
        return ("user",) if obj is None else ("user", "created")

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # a key is made or revoked, never edited

    def formfield_for_foreignkey(self, db_field, request: HttpRequest, **kwargs):
        if db_field.name == "user":
            users = get_user_model().objects.filter(auth_token__isnull=True)
            if not request.user.is_superuser:
                users = users.filter(pk=request.user.pk)
            kwargs["queryset"] = users.order_by("username")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue=None) -> HttpResponse:
        """The one page that shows the key: in answer to the form that made it, not kept by any
        cache, and never shown again."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"API key of {obj.user}",
            "key": obj.key,
            "api_key": obj,
        }
        response = TemplateResponse(request, "admin/api/apikey/created.html", context)
        add_never_cache_headers(response)
        return response


class UserAdmin(DjangoUserAdmin):
    def get_deleted_objects(self, objs, request: HttpRequest):
        """What deleting users deletes, as Django lists it, with their API keys' text hidden."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        keys = list(Token.objects.filter(user__in=[user.pk for user in objs]).values_list("key", flat=True))
        return _without(keys, deleted), counts, perms_needed, protected


def _without(keys: list[str], listed):
    """The nested list of `get_deleted_objects` with each key replaced by words (only a
    model without an admin page, as Token, is listed as plain text: links are left as they are)."""
    if isinstance(listed, list):
        return [_without(keys, entry) for entry in listed]
    for key in keys:
        if key in listed:
            listed = listed.replace(key, "(the key is not shown)")
    return listed


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), UserAdmin)
