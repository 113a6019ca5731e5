"""What the Prolific tests share: the loopback Prolific with the app pointed at it, a study ready
for Prolific, raters who vote through the hand-out and finish, and the draft made through the
service."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from annotations import assignment, completion
from annotations.models import Rater, Study
from prolific import services
from prolific.models import ProlificStudy
from tests.factories import make_question, make_rater, make_study
from tests.prolific_server import ProlificServer, prolific_server

TOKEN = "tok-researcher-0123456789"
LANDING = "https://study.example.org/s/"
# A rejection message as Prolific wants it: at least 100 characters, to the participant.
REJECTION = (
    "Thank you for taking part. Your submission failed most of the attention checks in the study, "
    "so we cannot accept it."
)


@pytest.fixture
def prolific(settings, monkeypatch) -> Iterator[ProlificServer]:
    with prolific_server(token=TOKEN, slow_seconds=1.0) as server:
        settings.PROLIFIC_API_URL = server.base_url
        settings.PROLIFIC_TIMEOUT_SECONDS = 0.4
        settings.PROLIFIC_MAX_TRIES = 4
        monkeypatch.setenv("PROLIFIC_API_TOKEN", TOKEN)
        yield server


def study_for_prolific(**kw) -> Study:
    """Three questions, two votes per item, three items per rater, one completion code."""
    kw.setdefault("votes_per_item", 2)
    kw.setdefault("target_per_rater", 3)
    kw.setdefault("completion_code", "C0DE1234")
    study = make_study(**kw)
    for _ in range(3):
        make_question(study)
    return study


def draft(study: Study, user=None, **kw) -> ProlificStudy:
    values = {
        "study": study,
        "user": user,
        "study_url": study.entry_links(f"{LANDING}{study.slug}/")["prolific"],
        "name": "Which answer is better?",
        "description": "Compare two short answers to a question and pick the better one.",
        "reward_cents": 150,
        "places": 2,
        "estimated_minutes": 5,
        "devices": ["desktop", "tablet"],
    }
    return services.prolific_study_create(**{**values, **kw})


def vote_all(rater: Rater, *, client_ms: int = 4000) -> int:
    """The rater votes on every item handed to them, then finishes: how many votes."""
    votes = 0
    while (lease := assignment.lease_next(rater=rater)) is not None:
        assignment.vote_record(
            rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="first", client_ms=client_ms
        )
        rater.refresh_from_db()
        votes += 1
    completion.rater_finish(rater=rater)
    return votes


def prolific_rater(study: Study, prolific: ProlificServer, link: ProlificStudy, **kw) -> tuple[Rater, str]:
    """A rater who came from Prolific, with their submission there (its id)."""
    rater = make_rater(study, source=Rater.Source.PROLIFIC, **kw)
    return rater, prolific.participant_join(link.prolific_id, rater.participant_id)
