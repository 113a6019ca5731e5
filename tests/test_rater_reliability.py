"""Which raters can I trust? The rater monitor shows each rater's reliability as the
Dawid-Skene consensus of the crowd's votes estimates it (analysis.consensus): a rater who votes
at random is estimated less reliable than careful ones."""

import pytest
from django.urls import reverse

from analysis import services
from analysis.simulate import JudgeParams
from annotations.models import Rater, Vote
from tests.factories import make_question, make_study, make_variant


@pytest.fixture
def crowd_study(db):
    """40 items voted by 3 of 4 careful simulated raters, one of whom then votes at random."""
    study = make_study(slug="reliability-s", votes_per_item=3)
    for _ in range(20):
        question = make_question(study)
        make_variant(question, kind="factual_error", text="Wrong facts. " * 5)
    services.raters_simulate(study=study, raters=4, params=JudgeParams(), seed=3)
    careless = Rater.objects.filter(study=study).order_by("participant_id").last()
    votes = list(Vote.objects.filter(rater=careless).order_by("id"))
    for i, vote in enumerate(votes):  # A1, A2, A1, ...: blind to the answers
        vote.choice = ("a1", "a2")[i % 2]
        vote.choice_shown = "first" if vote.choice == vote.shown_first else "second"
    Vote.objects.bulk_update(votes, ["choice", "choice_shown"])
    return study, careless


def test_the_monitor_estimates_the_careless_rater_least_reliable_and_shows_it(crowd_study, staff_client):
    study, careless = crowd_study
    monitor = {r["rater"]: r for r in services.raters_monitor(study=study)}
    labelled = Vote.objects.filter(choice__isnull=False, not_familiar=False)
    assert all(r["reliability_n"] == labelled.filter(rater=r["rater"]).count() > 0 for r in monitor.values())
    others = [r["reliability"] for rater, r in monitor.items() if rater != careless]
    assert monitor[careless]["reliability"] < min(others)
    page = staff_client.get(reverse("analysis:raters", args=[study.slug])).content.decode()
    assert "Reliability</th>" in page and f"{monitor[careless]['reliability_n']} labels" in page
