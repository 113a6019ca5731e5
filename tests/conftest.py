"""Personas and shared fixtures. Every view test should try each persona (anonymous visitor,
rater, another rater, staff) so access control is checked everywhere.
"""

import pytest
from django.test import Client

from tests.datasets import require
from tests.factories import make_question, make_rater, make_staff, make_study


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `dataset(...)` runs only where those data sets are (tests/datasets.py)."""
    for marker in item.iter_markers("dataset"):
        require(*marker.args)


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


# --------------------------------------------------------------------------- API personas


@pytest.fixture
def api_token(db):
    """A staff member's API token (throttle counters cleared, so tests do not share budgets)."""
    from django.core.cache import cache
    from rest_framework.authtoken.models import Token

    cache.clear()
    return Token.objects.create(user=make_staff())


@pytest.fixture
def token_client(api_token):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token.key}")
    return client


@pytest.fixture
def user_client(db) -> Client:
    """Logged in, but not staff."""
    from tests.factories import make_user

    client = Client()
    client.force_login(make_user())
    return client


@pytest.fixture
def rater_session_client(rater) -> Client:
    """What a rater's browser has: the signed rater cookie the rater pages set when they enter
    (through the landing page, as a real rater does), no Django user."""
    from django.urls import reverse

    client = Client()
    landing = reverse("annotations:landing", args=[rater.study.slug])
    response = client.post(landing, {"participant_id": rater.participant_id, "consent": "on"})
    assert response.status_code == 302, response.content
    assert f"rater-{rater.study.slug}" in client.cookies, "the landing page did not sign the rater in"
    return client


@pytest.fixture
def voted_study(small_study, rater):
    """small_study plus a reference variant with its item, an attention check, the human pool's
    votes from `rater` on every item, and a simulated judge's votes on the control items."""
    from types import SimpleNamespace

    from annotations.models import Answer, ComparisonItem, Question
    from tests.factories import human_pool, make_judge, make_variant, make_vote

    questions = list(small_study.questions.order_by("id"))
    variant = make_variant(questions[0], kind="reference", provenance={"method": "hand"}, checks={"length_ratio": 1.1})
    gold = Question.objects.create(
        study=small_study, external_id="gold-1", text="Gold?", bloom_level="remembering", is_gold=True
    )
    better = Answer.objects.create(question=gold, external_id="gold-1-better", text="Right.")
    worse = Answer.objects.create(question=gold, external_id="gold-1-worse", text="Wrong.")
    ComparisonItem.objects.create(study=small_study, question=gold, answer_a1=better, answer_a2=worse)
    humans, bot = human_pool(small_study), make_judge()
    items = list(small_study.items.order_by("id"))
    human_votes = [make_vote(item, humans, rater=rater, client_ms=4000) for item in items]
    bot_votes = [make_vote(item, bot, shown_first="a2", choice_shown="second") for item in small_study.items.control()]
    return SimpleNamespace(
        study=small_study,
        questions=questions,
        variant=variant,
        gold=gold,
        items=items,
        humans=humans,
        bot=bot,
        rater=rater,
        human_votes=human_votes,
        bot_votes=bot_votes,
    )


# --------------------------------------------------------------------------- live processes

from tests.live import live_database  # noqa: E402,F401 - the fresh database of live-server tests
from tests.llama_server import llama_server  # noqa: E402,F401 - llama.cpp's OpenAI-compatible server
