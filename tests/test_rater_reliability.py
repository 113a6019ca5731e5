"""Which raters can I trust? The rater monitor shows each rater's reliability as the
Dawid-Skene consensus of the crowd's votes estimates it (analysis.consensus): a rater who votes
at random is estimated less reliable than careful ones."""

import numpy as np
import pytest
from django.urls import reverse

from analysis import exports, rater_monitor, simulated_judges
from analysis.simulate import JudgeParams
from annotations.models import Rater, Vote
from tests.factories import make_question, make_study, make_variant


@pytest.fixture
def crowd_study(db):
    """40 items voted by 3 of 4 simulated raters, whose votes are then set from a known truth:
    three careful raters right 85% of the time, the fourth voting at random."""
    study = make_study(slug="reliability-s", votes_per_item=3)
    for _ in range(20):
        question = make_question(study)
        make_variant(question, kind="factual_error", text="Wrong facts. " * 5)
    simulated_judges.raters_simulate(study=study, raters=4, params=JudgeParams(), seed=3)
    careless = Rater.objects.filter(study=study).order_by("participant_id").last()
    rng = np.random.default_rng(4)
    votes = list(Vote.objects.filter(item__study=study, choice__isnull=False).order_by("id"))
    truth = {vote.item_id: ("a1", "a2")[rng.integers(2)] for vote in votes}
    for vote in votes:
        right = rng.random() < (0.5 if vote.rater_id == careless.id else 0.85)
        vote.choice = truth[vote.item_id] if right else {"a1": "a2", "a2": "a1"}[truth[vote.item_id]]
        vote.choice_shown = "first" if vote.choice == vote.shown_first else "second"
    Vote.objects.bulk_update(votes, ["choice", "choice_shown"])
    return study, careless


def test_the_monitor_estimates_the_careless_rater_least_reliable_and_shows_it(crowd_study, staff_client):
    study, careless = crowd_study
    monitor = {r["rater"]: r for r in rater_monitor.raters_monitor(study=study)}
    labelled = Vote.objects.filter(choice__isnull=False, not_familiar=False)
    assert all(r["reliability_n"] == labelled.filter(rater=r["rater"]).count() > 0 for r in monitor.values())
    others = [r["reliability"] for rater, r in monitor.items() if rater != careless]
    # About 30 labels each: rough estimates (measured: the careless rater 0.38, the careful
    # 0.62 to 0.82; the smoothing pulls both towards 1/3), but in the right order.
    assert monitor[careless]["reliability"] < 0.5 < min(others)
    csv_rows = list(exports.raters_rows(study))
    at = csv_rows[0].index("reliability")
    assert {row[1]: row[at] for row in csv_rows[1:]} == {r.pseudonym: m["reliability"] for r, m in monitor.items()}
    page = staff_client.get(reverse("analysis:raters", args=[study.slug])).content.decode()
    assert "Reliability</th>" in page and f"{monitor[careless]['reliability_n']} labels" in page
