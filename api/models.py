"""The API's one model: an API key (DRF's token) as the admin shows it, which is never its key.

A key is a password: whoever reads it acts as its user. So it is shown once, when it is made (the
admin's add page, or `manage.py drf_create_token`), and never again to anyone: not on a list, a
change page, a history page, nor in the admin's log (whose entries name an object by its str,
which for DRF's Token is the key itself).
"""

from __future__ import annotations

from rest_framework.authtoken.models import TokenProxy


class ApiKey(TokenProxy):
    """DRF's TokenProxy (its admin rows are named by the user's id, never by the key) named by
    its user."""

    class Meta:
        proxy = True
        verbose_name = "API key"
        verbose_name_plural = "API keys"

    def __str__(self) -> str:
        return f"API key of {self.user}"
