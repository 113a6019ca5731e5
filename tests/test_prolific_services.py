"""A study run on Prolific through its API, against the loopback Prolific (tests/prolific_server.py):
the draft, its cost, publish, the submissions in step, approve and reject by our rules, bonuses
paid once; Prolific's 429s, a timeout, its 4xx messages; a submission returned while its rater
votes."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotations import assignment
from annotations.models import Lease, Rater, Slot, Vote
from prolific import services
from prolific.client import ProlificClient, ProlificError
from prolific.models import Bonus, BonusBatch, ProlificCall, ProlificStudy, ProlificSubmission
from tests.factories import make_staff
from tests.prolific_helpers import REJECTION, TOKEN, draft, prolific, prolific_rater, study_for_prolific, vote_all

__all__ = ["prolific"]  # the fixture

pytestmark = pytest.mark.django_db


def test_a_study_goes_from_draft_to_paid_bonuses(prolific):
    staff = make_staff()
    study = study_for_prolific()
    link = draft(study, staff)
    sent = prolific.studies[link.prolific_id]
    assert link.status == "UNPUBLISHED"
    assert sent["completion_codes"] == [
        {"code": "C0DE1234", "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}
    ]
    assert sent["external_study_url"].endswith(
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert (sent["reward"], sent["total_available_places"], sent["device_compatibility"]) == (
        150,
        2,
        ["desktop", "tablet"],
    )
    study.refresh_from_db()
    assert study.prolific_completion_url == "https://app.prolific.com/submissions/complete?cc=C0DE1234"

    # 150 cents x 2 places, plus the stand-in's fee of a third: 399.99 cents, Prolific rounds to 400.
    assert services.prolific_study_cost(study=study, user=staff) == Decimal("4.00")
    assert services.prolific_study_transition(study=study, user=staff, action="PUBLISH").status == "ACTIVE"

    good, good_sub = prolific_rater(study, prolific, link)
    careless, careless_sub = prolific_rater(study, prolific, link)
    assert vote_all(good) == 3
    vote_all(careless)
    Rater.objects.filter(pk=careless.pk).update(flagged=True, flag_reason="attention checks: 0/3 correct, under 75%")
    for sub in (good_sub, careless_sub):
        prolific.submission_set(sub, status="AWAITING REVIEW", study_code="C0DE1234")

    assert services.prolific_submissions_sync(study=study, user=staff) == {"submissions": 2, "freed": 0}
    assert ProlificSubmission.objects.get(submission_id=good_sub).rater == good

    # By our rules: the good rater is approved, the one who failed the attention checks rejected.
    assert services.prolific_approve(study=study, user=staff, suggested=True) == 1
    assert (
        services.prolific_reject(study=study, user=staff, suggested=True, category="FAILED_CHECK", message=REJECTION)
        == 1
    )
    assert (prolific.submissions[good_sub]["status"], prolific.submissions[careless_sub]["status"]) == (
        "APPROVED",
        "REJECTED",
    )
    assert ProlificSubmission.objects.get(submission_id=careless_sub).status == "REJECTED"

    preview = services.prolific_bonuses_preview(study=study, per_vote=Decimal("0.05"))
    assert (preview["count"], preview["total"]) == (1, Decimal("0.15"))  # three counted votes
    batch = services.prolific_bonuses_pay(study=study, user=staff, per_vote=Decimal("0.05"))
    assert batch.state == BonusBatch.State.PAID and batch.requested_by == staff
    assert [(p, a) for _, p, a in prolific.paid] == [(good.participant_id, Decimal("0.15"))]

    # Pressed again (or the task retried): nothing more is paid, and the preview says so.
    assert services.prolific_bonuses_pay(study=study, user=staff, per_vote=Decimal("0.05")) is None
    assert services.prolific_bonuses_pay(study=study, user=staff, per_rater=Decimal("1.00")) is None
    assert len(prolific.paid) == 1
    assert services.prolific_bonuses_preview(study=study, per_vote=Decimal("0.05"))["count"] == 0

    calls = list(ProlificCall.objects.filter(study=study).order_by("at", "id").values_list("what", "ok", "user"))
    assert calls[:4] == [
        ("create draft", True, staff.pk),
        ("cost", True, staff.pk),
        ("publish", True, staff.pk),
        ("sync study", True, staff.pk),
    ]
    assert ("bonuses pay", True, staff.pk) in calls


def test_the_estimated_minutes_come_from_the_studys_own_median_time_per_item(prolific):
    study = study_for_prolific(target_per_rater=3)
    assert services.prolific_draft_defaults(study=study)["estimated_minutes"] == 2  # 30 s an item assumed
    link = draft(study)
    rater, _ = prolific_rater(study, prolific, link)
    vote_all(rater, client_ms=50_000)
    defaults = services.prolific_draft_defaults(study=study)
    # 50 s an item, three items: 150 s, rounded up to three minutes.
    assert (defaults["seconds_per_item"], defaults["timed_votes"], defaults["estimated_minutes"]) == (50.0, 3, 3)


def test_a_429_is_tried_again_and_then_succeeds(prolific):
    prolific.fail_next(429, times=2, path="/studies/$")
    link = draft(study_for_prolific())
    assert link.prolific_id in prolific.studies
    assert len(prolific.requests_to(r"/api/v1/studies/$")) == 3


def test_429s_are_tried_a_bounded_number_of_times_and_leave_nothing(prolific, settings):
    study = study_for_prolific()
    prolific.fail_next(429, times=10, detail="Wallet is busy, try again", path="/studies/$")
    with pytest.raises(ProlificError, match="429.*Wallet is busy") as caught:
        draft(study)
    assert caught.value.status == 429
    assert len(prolific.requests_to(r"/api/v1/studies/$")) == settings.PROLIFIC_MAX_TRIES
    assert not ProlificStudy.objects.exists()
    assert ProlificCall.objects.get(study=study).ok is False


def test_a_timeout_leaves_nothing_half_done(prolific):
    study = study_for_prolific()
    prolific.slow_next(path="/studies/$")
    with pytest.raises(ProlificError, match="did not answer within"):
        draft(study)
    assert not ProlificStudy.objects.exists()
    study.refresh_from_db()
    assert study.prolific_completion_url == ""
    call = ProlificCall.objects.get(study=study)
    assert (call.what, call.ok) == ("create draft", False)


def test_prolifics_4xx_message_is_given_as_it_gave_it(prolific):
    study = study_for_prolific()
    draft(study)
    with pytest.raises(ProlificError, match="400.*A study in status UNPUBLISHED cannot be transitioned with PAUSE"):
        services.prolific_study_transition(study=study, action="PAUSE", user=None)
    with pytest.raises(ProlificError, match="reward: Ensure this value is a whole number"):
        draft(study_for_prolific(), reward_cents=0)


def test_a_rejection_breaking_prolifics_rules_is_refused_before_any_call(prolific):
    study = study_for_prolific()
    link = draft(study)
    rater, sub = prolific_rater(study, prolific, link)
    services.prolific_submissions_sync(study=study)
    before = len(prolific.log)
    with pytest.raises(ProlificError, match="at least 100 characters"):
        services.prolific_reject(
            study=study, user=None, submission_ids=[sub], category="LOW_EFFORT", message="Too quick."
        )
    with pytest.raises(ProlificError, match="needs a category"):
        services.prolific_reject(study=study, user=None, submission_ids=[sub], category="", message=REJECTION)
    assert len(prolific.log) == before


def test_the_token_comes_from_the_environment_and_is_never_shown(prolific, monkeypatch):
    study = study_for_prolific()
    monkeypatch.setenv("PROLIFIC_API_TOKEN", "wrong-token-987")
    with pytest.raises(ProlificError, match="401.*Invalid token") as caught:
        draft(study)
    assert "wrong-token-987" not in str(caught.value)
    monkeypatch.delenv("PROLIFIC_API_TOKEN")
    with pytest.raises(ProlificError, match="PROLIFIC_API_TOKEN"):
        draft(study)
    assert not any(TOKEN in r or "wrong-token" in r for r in ProlificCall.objects.values_list("result", flat=True))
    assert ProlificClient().base_url == prolific.base_url


def test_a_submission_returned_while_its_rater_votes_frees_the_item_and_keeps_the_late_vote(prolific):
    study = study_for_prolific(votes_per_item=1)
    link = draft(study)
    services.prolific_study_transition(study=study, user=None, action="PUBLISH")
    rater, sub = prolific_rater(study, prolific, link)
    lease = assignment.lease_next(rater=rater)
    assert Slot.objects.filter(item=lease.item, rater=rater).exists()

    prolific.submission_set(sub, status="RETURNED")
    assert services.prolific_submissions_sync(study=study)["freed"] == 1
    lease.refresh_from_db()
    assert lease.released_at is not None
    assert not Slot.objects.filter(rater=rater).exists()  # the item is free for others at once
    other, _ = prolific_rater(study, prolific, link)
    taken = assignment.lease_next(rater=other)
    assert taken is not None

    # The returned rater's vote, still on its way, is stored as any late vote is: not lost.
    outcome = assignment.vote_record(
        rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="first", client_ms=4000
    )
    assert outcome.created and outcome.late and outcome.counted
    assert Vote.objects.filter(rater=rater, item=lease.item).exists()
    assert Slot.objects.filter(vote=outcome.vote).exists()
    rater.refresh_from_db()
    assert assignment.lease_next(rater=rater) is None  # handed nothing more
    assert services.prolific_submissions_sync(study=study)["freed"] == 0  # once
    assert Lease.objects.filter(rater=rater).count() == 1


def test_a_pay_call_without_an_answer_is_never_sent_again(prolific):
    study = study_for_prolific()
    link = draft(study)
    rater, sub = prolific_rater(study, prolific, link)
    vote_all(rater)
    services.prolific_submissions_sync(study=study)
    prolific.slow_next(path="/pay/$")
    with pytest.raises(ProlificError, match="did not answer"):
        services.prolific_bonuses_pay(study=study, user=None, per_rater=Decimal("0.50"))
    batch = BonusBatch.objects.get()
    assert batch.state == BonusBatch.State.UNKNOWN
    assert services.prolific_bonuses_pay(study=study, user=None, per_rater=Decimal("0.50")) is None
    assert len(prolific.requests_to("/pay/$")) == 1
    assert Bonus.objects.get().rater == rater


def test_a_bonus_prolific_refused_can_be_paid_later(prolific):
    study = study_for_prolific()
    link = draft(study)
    rater, _ = prolific_rater(study, prolific, link)
    vote_all(rater)
    services.prolific_submissions_sync(study=study)
    prolific.fail_next(400, detail="Insufficient funds in your wallet.", path="/pay/$")
    with pytest.raises(ProlificError, match="Insufficient funds"):
        services.prolific_bonuses_pay(study=study, user=None, per_rater=Decimal("0.50"))
    assert BonusBatch.objects.get().state == BonusBatch.State.FAILED and not Bonus.objects.exists()
    assert services.prolific_bonuses_pay(study=study, user=None, per_rater=Decimal("0.50")).state == "paid"
    assert [(p, a) for _, p, a in prolific.paid] == [(rater.participant_id, Decimal("0.50"))]


def test_a_token_prolific_repeats_in_an_error_is_not_passed_on(prolific):
    study = study_for_prolific()
    prolific.fail_next(400, detail=f"Token {TOKEN} is not allowed to create studies", path="/studies/$")
    with pytest.raises(ProlificError, match=r"Token \[token\] is not allowed") as caught:
        draft(study)
    assert TOKEN not in str(caught.value)
    assert TOKEN not in ProlificCall.objects.get(study=study).result


def test_every_page_of_submissions_is_read(prolific):
    study = study_for_prolific(votes_per_item=20)
    link = draft(study)
    raters = [prolific_rater(study, prolific, link)[0] for _ in range(25)]  # two pages of 20
    assert services.prolific_submissions_sync(study=study)["submissions"] == 25
    assert set(ProlificSubmission.objects.values_list("rater", flat=True)) == {r.pk for r in raters}
    assert len(prolific.requests_to(r"/submissions/")) == 2
