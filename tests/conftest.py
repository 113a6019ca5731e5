"""Personas and shared fixtures. Every view test should try each persona (anonymous visitor,
rater, another rater, staff) so access control is checked everywhere.
"""

import pytest
from django.test import Client

from tests.factories import make_question, make_rater, make_staff, make_study


@pytest.fixture
def study(db):
    return make_study()


@pytest.fixture
def staff_client(db) -> Client:
    client = Client()
    client.force_login(make_staff())
    return client


@pytest.fixture
def anon_client() -> Client:
    return Client()


@pytest.fixture
def small_study(db):
    """A study with three questions, each with its control item."""
    study = make_study(votes_per_item=2, target_per_rater=3)
    for _ in range(3):
        make_question(study)
    return study


@pytest.fixture
def rater(small_study):
    return make_rater(small_study)
