"""Each token has its own request budget (settings.API_THROTTLE_RATE)."""

import importlib

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import biasstudy.settings
from biasstudy.env import EnvError
from tests.factories import make_staff

URL = "/api/v1/studies/"


def test_a_token_over_its_rate_gets_429_with_retry_after_and_others_do_not(token_client, settings, db):
    settings.API_THROTTLE_RATE = "3/minute"
    cache.clear()
    assert [token_client.get(URL).status_code for _ in range(3)] == [200, 200, 200]
    response = token_client.get(URL)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "throttled" in response.json()["detail"].lower()

    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_staff()).key}")
    assert other.get(URL).status_code == 200


def test_the_rate_setting_is_checked_at_start_up(monkeypatch):
    monkeypatch.setenv("API_THROTTLE_RATE", "lots")
    try:
        with pytest.raises(EnvError, match="API_THROTTLE_RATE"):
            importlib.reload(biasstudy.settings)
    finally:
        monkeypatch.delenv("API_THROTTLE_RATE")
        importlib.reload(biasstudy.settings)
