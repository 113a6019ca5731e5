"""Driving Debian's Chromium with Playwright, the one way browser tests start a browser.

Chromium is the distribution's (/usr/bin/chromium, installed by scripts/test.sh); Playwright's
own browser downloads cannot work here. The flags keep it from calling home, which this
machine's closed network would refuse.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def _playwright() -> Iterator[Any]:
    """Playwright, once Chromium is known to be there. Without Chromium the test is skipped,
    except in CI, where a missing browser is a broken set-up and fails."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is not installed")
    # Playwright's sync API keeps an event loop in this thread; our ORM calls are plain sync code.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        try:
            yield playwright
        finally:
            # While that loop runs, Django keeps this thread's connections apart from its others
            # (asgiref's Local follows a running loop): the ORM calls made in the block opened
            # connections of their own, which nothing closed. On PostgreSQL the test database
            # then could not be dropped ("being accessed by other users") and was left behind.
            connections.close_all()


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched browser, closed afterwards. Its pages block third-party cookies (as this
    Chromium does by default, and any Chromium in an incognito window)."""
    with _playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def chromium_with_third_party_cookies() -> Iterator[Any]:
    """A browser context whose profile allows third-party cookies (the "Allow third-party
    cookies" setting, `cookie_controls_mode` 0), closed afterwards: a worker's everyday Chrome."""
    with _playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        os.mkdir(os.path.join(profile, "Default"))
        with open(os.path.join(profile, "Default", "Preferences"), "w") as prefs:
            json.dump({"profile": {"cookie_controls_mode": 0}}, prefs)
        context = playwright.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield context
        finally:
            context.close()


def session_cookie(user, url: str) -> dict:
    """A cookie that logs the browser in as `user` on the live server at `url`."""
    client = Client()
    client.force_login(user)
    return {
        "name": settings.SESSION_COOKIE_NAME,
        "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
        "url": url,
    }


def expect(locator: Any) -> Any:
    """Playwright's polling assertions. Prefer them to wait_for_function: our pages' CSP forbids
    evaluating strings, which wait_for_function does inside the page."""
    return pytest.importorskip("playwright.sync_api").expect(locator)
