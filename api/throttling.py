"""One request budget per API token: scripts share nothing with each other or with the browser."""

import hashlib

from django.conf import settings
from rest_framework.authtoken.models import Token
from rest_framework.throttling import UserRateThrottle


class TokenRateThrottle(UserRateThrottle):
    """settings.API_THROTTLE_RATE per token, or per user for a staff member in the browsable API.

    The rate is read at request time (not frozen into the class when DRF imports it), so a
    deployment or a test can change it through settings alone.
    """

    scope = "api"

    def get_rate(self) -> str:
        return settings.API_THROTTLE_RATE

    def get_cache_key(self, request, view) -> str | None:
        if isinstance(request.auth, Token):
            # The cache key must not carry the secret itself.
            ident = "token-" + hashlib.sha256(request.auth.key.encode()).hexdigest()[:24]
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
