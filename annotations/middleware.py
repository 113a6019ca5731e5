"""Cookies for the rater pages MTurk shows inside its HIT frame.

A browser sends a cookie from inside a cross-site iframe only when it is `SameSite=None; Secure`
(and third-party cookies are not blocked). Views mark such a response with `frame_cookies = True`
(annotations.pages.mturk_frame); this middleware, placed before CsrfViewMiddleware, sees every cookie of
that response, Django's CSRF cookie included, and gives each those two attributes. Every other
response keeps the settings' SameSite=Lax.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port

LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


def secure_cookies_accepted(request: HttpRequest) -> bool:
    """Whether a browser stores a Secure cookie from this response: over HTTPS, and (in
    Chromium and Firefox) from http://localhost or a loopback address, which count as
    potentially trustworthy. Anywhere else a Secure cookie would be dropped."""
    host, _port = split_domain_port(request.get_host())
    return request.is_secure() or host in LOOPBACK_HOSTS


class FrameCookiesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(response, "frame_cookies", False) and secure_cookies_accepted(request):
            for morsel in response.cookies.values():
                morsel["samesite"] = "None"
                morsel["secure"] = True
        return response
