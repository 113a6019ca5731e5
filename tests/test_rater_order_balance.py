"""Display order is balanced within each rater as well as within each item: over many simulated
raters arriving in random order, every rater saw the A2 side first on half of their scored items
(± 1) while every item's counted votes are exactly half in each order; so a rater who always
picks the left answer adds no preference for A2 to the analysis."""

import random
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from analysis.loader import study_frame
from annotations.assignment import lease_next, vote_record
from annotations.completion import rater_can_get_more, rater_enter
from annotations.models import Lease, Rater, Slot, Study
from tests.factories import make_question, make_study, make_variant

pytestmark = pytest.mark.django_db


def _study(questions: int, **kw) -> Study:
    study = make_study(votes_per_item=6, lease_seconds=60, **kw)
    for n in range(questions):
        question = make_question(study)
        if n % 2:
            make_variant(question, kind="reference")
    return study


def _crowd(study: Study, raters: int, rng: random.Random, *, choose, abandon: float = 0.05) -> list[Rater]:
    """`raters` raters who come and go in random order until the study has nothing more for any
    of them; each answers with `choose(rng)` and now and then leaves an item to expire."""
    crowd = [rater_enter(study=study, participant_id=f"R{n:03d}") for n in range(raters)]
    now = timezone.now()
    active = list(crowd)
    while active:
        rater = rng.choice(active)
        now += timedelta(seconds=rng.randint(1, 9))
        lease = lease_next(rater=rater, now=now)
        if lease is None:
            if not rater_can_get_more(rater=rater):
                active.remove(rater)
            continue
        if rng.random() < abandon:  # gone for a while: the lease expires, the slot goes round
            continue
        vote_record(
            rater_id=rater.pk,
            slug=study.slug,
            token=lease.token,
            choice_shown=choose(rng),
            not_familiar=rng.random() < 0.05,
            client_ms=8000,
            now=now + timedelta(seconds=8),
        )
        rater.refresh_from_db()
    return crowd


def _leads(study: Study) -> dict[int, int]:
    """Each rater's (A2 first − A1 first) over the scored items they voted on."""
    lead: Counter = Counter()
    voted = Lease.objects.filter(study=study, voted_at__isnull=False, is_gold=False)
    for rater_id, order in voted.values_list("rater_id", "shown_first"):
        lead[rater_id] += 1 if order == "a2" else -1
    return dict(lead)


@pytest.mark.parametrize("seed", [1, 2])
def test_every_rater_sees_each_order_on_half_their_items_and_every_item_stays_exactly_balanced(seed):
    rng = random.Random(seed)
    study = _study(32, target_per_rater=32, gold_every=0)
    _crowd(study, 40, rng, choose=lambda r: r.choice(["first", "second", "tie"]))
    leads = _leads(study)
    assert len(leads) == 40 and all(abs(lead) <= 1 for lead in leads.values()), sorted(leads.values())
    assert leads == {r.pk: r.a2_first_lead for r in Rater.objects.filter(study=study)}, "the kept count is the truth"
    slots = Slot.objects.filter(study=study)
    assert not slots.filter(vote__isnull=True).exists(), "every item reached its quota"
    per_item = Counter(slots.values_list("item_id", "shown_first"))
    assert set(per_item.values()) == {3}, "three counted votes in each order on every item"
    assert len(per_item) == 2 * study.items.count()


def test_a_rater_who_always_picks_the_left_answer_adds_no_preference_for_a2():
    """The left habit of 40 raters over a 48-item study: in the analysis's votes frame every
    rater's votes go to A1 and A2 equally (± 1), so over all of them the share for A2 is a half
    to within a vote per rater; drawn independently per vote the order would leave a rater 8 of
    8 on one side now and then (the spread of a binomial, not ± 1)."""
    rng = random.Random(7)
    study = _study(48, target_per_rater=16)
    _crowd(study, 40, rng, choose=lambda r: "first")
    frame = study_frame(study)
    scored = frame[~frame["is_gold"] & ~frame["not_familiar"]]
    assert (scored["choice_shown"] == "first").all()
    net = scored.groupby("rater", observed=True)["choice"].agg(lambda c: int((c == "a2").sum() - (c == "a1").sum()))
    assert len(net) == 40
    # Not-familiar votes are left out of the analysis, so a rater's counted votes may lose one
    # item of either order: ± 1 becomes ± 2 for those who had one.
    nf = frame[frame["not_familiar"]].groupby("rater", observed=True).size().reindex(net.index, fill_value=0)
    assert (net.abs() <= 1 + nf).all(), net.to_dict()
    share = (scored["choice"] == "a2").mean()
    assert abs(share - 0.5) <= (len(net) + nf.sum()) / len(scored) / 2 + 1e-9
