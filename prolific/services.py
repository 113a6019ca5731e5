"""Running a study on Prolific through its API: the draft, its cost, publish / pause / resume /
stop, the submissions kept in step, approve and reject, and bonuses paid once.

Every call to Prolific is logged on the study (`ProlificCall`: what, when, by whom, result), a
failed one too, outside any transaction so that a rollback cannot lose it. Nothing of ours is
written for a call that failed: the local rows change only after Prolific's answer. The one
call that must never be made twice, paying a bulk bonus (Prolific's is not idempotent), is
claimed in the database first: each rater's bonus is recorded (`Bonus`, one per rater, a unique
constraint) before anything is sent, and the pay call is made by the one caller whose
conditional update moved its batch from "set up" to "paying".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from analysis.exports import rater_bonus
from analysis.rater_monitor import raters_monitor
from annotations.assignment import rater_leases_release
from annotations.models import Judge, Rater, Slot, Study, Vote
from prolific.client import ProlificClient, ProlificError
from prolific.models import Bonus, BonusBatch, ProlificCall, ProlificStudy, ProlificSubmission

# What a draft study is when the study has no timed vote yet to measure items by.
DEFAULT_SECONDS_PER_ITEM = 30
# Prolific's enums (its API reference).
STUDY_ACTIONS = {"PUBLISH": "publish", "PAUSE": "pause", "START": "resume", "STOP": "stop"}
REJECTION_CATEGORIES = {
    "TOO_QUICKLY": "completed too quickly",
    "TOO_SLOWLY": "completed too slowly",
    "FAILED_INSTRUCTIONS": "did not follow the instructions",
    "INCOMP_LONGITUDINAL": "incomplete longitudinal study",
    "FAILED_CHECK": "failed attention checks",
    "LOW_EFFORT": "low effort",
    "MALINGERING": "malingering",
    "NO_CODE": "no completion code",
    "BAD_CODE": "wrong completion code",
    "NO_DATA": "no data",
    "UNSUPP_DEVICE": "unsupported device",
    "OTHER": "other",
}
REJECTION_MESSAGE_MIN = 100  # characters, Prolific's rule
DEVICES = ("desktop", "tablet", "mobile")
# Where Prolific's participants are sent back to with the study's code (its study object's docs).
COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"


class ProlificNotLinked(ProlificError):
    """The study has no Prolific study yet."""


def _logged(
    study: Study,
    user: AbstractBaseUser | None,
    what: str,
    call: Callable[[], Any],
    summary: Callable[[Any], str] = lambda a: "ok",
) -> Any:
    """Make one call to Prolific and log it on the study, failed or not."""
    user = user if user is not None and user.is_authenticated else None
    try:
        answer = call()
    except ProlificError as exc:
        ProlificCall.objects.create(study=study, what=what, user=user, ok=False, result=str(exc)[:2000])
        raise
    ProlificCall.objects.create(study=study, what=what, user=user, ok=True, result=summary(answer)[:2000])
    return answer


def prolific_link(*, study: Study) -> ProlificStudy:
    try:
        return ProlificStudy.objects.get(study=study)
    except ProlificStudy.DoesNotExist:
        raise ProlificNotLinked("this study has no Prolific study yet: create the draft first") from None


# --- the draft ------------------------------------------------------------------------------


def seconds_per_item(*, study: Study) -> tuple[float, int]:
    """The study's own median time per item, from its raters' votes (the browser's time), and
    how many votes it rests on; DEFAULT_SECONDS_PER_ITEM on none."""
    times = list(
        Vote.objects.filter(item__study=study, judge__kind=Judge.Kind.HUMAN, client_ms__isnull=False).values_list(
            "client_ms", flat=True
        )
    )
    if not times:
        return float(DEFAULT_SECONDS_PER_ITEM), 0
    return statistics.median(times) / 1000, len(times)


def prolific_draft_defaults(*, study: Study) -> dict:
    """What the draft form starts from: the study's title and instructions' first line, its
    estimated minutes (the median time per item times each rater's target, rounded up) and the
    places its open slots need (each rater fills up to their target)."""
    per_item, measured = seconds_per_item(study=study)
    open_slots = Slot.objects.filter(study=study).rateable().count()
    return {
        "name": study.title,
        "description": (study.instructions.strip().splitlines() or [study.title])[0][:500],
        "estimated_minutes": max(1, math.ceil(per_item * study.target_per_rater / 60)),
        "places": max(1, math.ceil(open_slots / max(study.target_per_rater, 1))),
        "devices": list(DEVICES),
        "seconds_per_item": per_item,
        "timed_votes": measured,
    }


def prolific_study_create(
    *,
    study: Study,
    user: AbstractBaseUser | None,
    study_url: str,
    name: str,
    description: str,
    reward_cents: int,
    places: int,
    estimated_minutes: int,
    devices: list[str],
) -> ProlificStudy:
    """Create the study on Prolific as a draft (UNPUBLISHED): our study URL with Prolific's
    placeholders (`Study.entry_links`' "prolific"), the study's completion code in Prolific's
    `completion_codes` form (manual review: approval follows our rules), places, reward in cents,
    estimated minutes and the devices allowed. The study's Prolific completion URL is set when it
    has none, so that finishers are sent back with the code."""
    if ProlificStudy.objects.filter(study=study).exists():
        raise ProlificError("this study has a Prolific study already")
    code = study.completion_code.strip()
    if study.per_rater_codes or not code:
        raise ProlificError(
            "Prolific checks one completion code: give the study a completion code, without per-rater codes"
        )
    unknown = sorted(set(devices) - set(DEVICES))
    if unknown or not devices:
        raise ProlificError(f"devices must be some of {', '.join(DEVICES)} (got {', '.join(unknown) or 'none'})")
    body = {
        "name": name,
        "internal_name": f"biasstudy {study.slug}",
        "description": description,
        "external_study_url": study_url,
        "prolific_id_option": "url_parameters",
        "completion_codes": [{"code": code, "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}],
        "total_available_places": places,
        "reward": reward_cents,
        "estimated_completion_time": estimated_minutes,
        "device_compatibility": list(devices),
    }
    client = ProlificClient()
    answer = _logged(study, user, "create draft", lambda: client.study_create(body), lambda a: f"draft {a.get('id')}")
    try:
        return _link_create(
            study,
            answer,
            code=code,
            reward_cents=reward_cents,
            places=places,
            estimated_minutes=estimated_minutes,
            devices=devices,
        )
    except IntegrityError:
        # Two drafts asked for at once: the other one is the study's; this one is only on Prolific.
        raise ProlificError(
            f"another Prolific study was made for this study at the same time: delete the draft "
            f"{answer['id']} on Prolific"
        ) from None


def _link_create(
    study: Study, answer: dict, *, code: str, reward_cents: int, places: int, estimated_minutes: int, devices: list[str]
) -> ProlificStudy:
    with transaction.atomic():
        link = ProlificStudy.objects.create(
            study=study,
            prolific_id=answer["id"],
            status=answer.get("status", "UNPUBLISHED"),
            reward_cents=reward_cents,
            places=places,
            estimated_minutes=estimated_minutes,
            devices=list(devices),
        )
        if not study.prolific_completion_url:
            study.prolific_completion_url = COMPLETION_URL.format(code=code)
            study.save(update_fields=["prolific_completion_url"])
    return link


def prolific_study_cost(*, study: Study, user: AbstractBaseUser | None) -> Decimal:
    """The draft's total cost from Prolific's cost calculator (fees and VAT included), in the
    account's currency (Prolific answers in cents)."""
    link = prolific_link(study=study)
    client = ProlificClient()
    answer = _logged(
        study,
        user,
        "cost",
        lambda: client.study_cost(reward=link.reward_cents, places=link.places),
        lambda a: f"total cost {a.get('total_cost')} cents",
    )
    return (Decimal(str(answer["total_cost"])) / 100).quantize(Decimal("0.01"))


def prolific_study_transition(*, study: Study, user: AbstractBaseUser | None, action: str) -> ProlificStudy:
    """PUBLISH, PAUSE, START (resume) or STOP the Prolific study; its status as Prolific gives it."""
    if action not in STUDY_ACTIONS:
        raise ProlificError(f"no study action {action!r}: choose one of {', '.join(STUDY_ACTIONS)}")
    link = prolific_link(study=study)
    client = ProlificClient()
    answer = _logged(
        study,
        user,
        STUDY_ACTIONS[action],
        lambda: client.study_transition(link.prolific_id, action),
        lambda a: f"status {a.get('status')}",
    )
    link.status = answer.get("status", link.status)
    ProlificStudy.objects.filter(pk=link.pk).update(status=link.status)
    return link


# --- submissions ------------------------------------------------------------------------------


def prolific_submissions_sync(*, study: Study, user: AbstractBaseUser | None = None) -> dict:
    """Bring the study's status and its submissions in step with Prolific's. A submission
    RETURNED, TIMED-OUT or REJECTED frees its rater's leased item at once (and they get nothing
    more: annotations.assignment.rater_leases_release), so that the quota fills with others.
    Returns how many submissions there are and how many raters were freed now."""
    link = prolific_link(study=study)
    client = ProlificClient()
    remote = _logged(
        study, user, "sync study", lambda: client.study_get(link.prolific_id), lambda a: f"status {a.get('status')}"
    )
    found = _logged(
        study, user, "sync submissions", lambda: client.submissions(link.prolific_id), lambda a: f"{len(a)} submissions"
    )
    now = timezone.now()
    raters = {
        r.participant_id: r
        for r in Rater.objects.filter(study=study, participant_id__in=[s.get("participant_id") for s in found])
    }
    with transaction.atomic():
        ProlificStudy.objects.filter(pk=link.pk).update(status=remote.get("status", link.status), synced_at=now)
        for s in found:
            ProlificSubmission.objects.update_or_create(
                prolific_study=link,
                submission_id=s["id"],
                defaults={
                    "participant_id": s.get("participant_id", ""),
                    "status": s.get("status", ""),
                    "rater": raters.get(s.get("participant_id")),
                    "synced_at": now,
                },
            )
    freed = 0
    gone = link.submissions.filter(status__in=ProlificSubmission.GONE, freed_at__isnull=True, rater__isnull=False)
    for submission in gone.select_related("rater__study"):
        rater_leases_release(rater=submission.rater, now=now)
        freed += ProlificSubmission.objects.filter(pk=submission.pk, freed_at__isnull=True).update(freed_at=now)
    return {"submissions": len(found), "freed": freed}


def prolific_review_rows(*, study: Study) -> list[dict]:
    """Each submission with its rater's row of the rater monitor (status, suggested action and
    why, counted votes): what the Prolific page lists and what "approve / reject all" reads."""
    link = prolific_link(study=study)
    monitor = {row["rater"].pk: row for row in raters_monitor(study=study)}
    return [
        {"submission": s, "monitor": monitor.get(s.rater_id)}
        for s in link.submissions.select_related("rater").order_by("participant_id")
    ]


def _suggested(study: Study, action: str) -> list[str]:
    return [
        row["submission"].submission_id
        for row in prolific_review_rows(study=study)
        if row["submission"].status == "AWAITING REVIEW" and row["monitor"] and row["monitor"]["action"] == action
    ]


def rejection_check(*, category: str, message: str) -> None:
    """Prolific's rules for a rejection, checked before the call."""
    if category not in REJECTION_CATEGORIES:
        raise ProlificError(f"a rejection needs a category, one of {', '.join(REJECTION_CATEGORIES)}")
    if len(message.strip()) < REJECTION_MESSAGE_MIN:
        raise ProlificError(
            f"a rejection needs a message of at least {REJECTION_MESSAGE_MIN} characters, to the participant "
            f"(this one has {len(message.strip())})"
        )


def _transition_each(study: Study, user: AbstractBaseUser | None, ids: list[str], body: dict, what: str) -> int:
    """One transition per submission, each recorded as Prolific answers it; a failure stops the
    rest and says how many were done before it."""
    link = prolific_link(study=study)
    known = set(link.submissions.filter(submission_id__in=ids).values_list("submission_id", flat=True))
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ProlificError(f"not a submission of this study: {', '.join(unknown)}")
    client = ProlificClient()
    done = 0
    for submission_id in ids:
        try:
            answer = _logged(
                study,
                user,
                f"{what} {submission_id}",
                lambda s=submission_id: client.submission_transition(s, body),
                lambda a: f"status {a.get('status')}",
            )
        except ProlificError as exc:
            raise ProlificError(f"{done} {what}d before this one; {exc}", status=exc.status) from exc
        ProlificSubmission.objects.filter(prolific_study=link, submission_id=submission_id).update(
            status=answer.get("status", "")
        )
        done += 1
    return done


def prolific_approve(
    *, study: Study, user: AbstractBaseUser | None, submission_ids: list[str] | None = None, suggested: bool = False
) -> int:
    """Approve these submissions, or (`suggested`) every one awaiting review whose rater our
    quality rules pass (analysis.rater_monitor.suggested_action: "approve"). How many were approved."""
    ids = _suggested(study, "approve") if suggested else list(submission_ids or [])
    return _transition_each(study, user, ids, {"action": "APPROVE"}, "approve")


def prolific_reject(
    *,
    study: Study,
    user: AbstractBaseUser | None,
    category: str,
    message: str,
    submission_ids: list[str] | None = None,
    suggested: bool = False,
) -> int:
    """Reject these submissions, or (`suggested`) every one awaiting review whose rater our
    quality rules fail ("reject"), with Prolific's category and a message of at least 100
    characters (checked before any call)."""
    rejection_check(category=category, message=message)
    ids = _suggested(study, "reject") if suggested else list(submission_ids or [])
    body = {"action": "REJECT", "rejection_category": category, "message": message.strip()}
    return _transition_each(study, user, ids, body, "reject")


# --- bonuses ---------------------------------------------------------------------------------


def prolific_bonuses_preview(
    *, study: Study, per_vote: Decimal | None = None, per_rater: Decimal | None = None
) -> dict:
    """The bonuses that `per_vote` (for each counted vote) or `per_rater` would pay, to the raters
    with a Prolific submission whom our rules suggest approving (analysis.exports.rater_bonus):
    each line, whether that rater has a bonus already (then nothing more is paid to them), and the
    count and total still to pay."""
    if (per_vote is None) == (per_rater is None):
        raise ProlificError("give a bonus per counted vote or a bonus per rater, one of the two")
    link = prolific_link(study=study)
    submitted = set(link.submissions.filter(rater__isnull=False).values_list("rater_id", flat=True))
    already = dict(Bonus.objects.filter(rater__study=study).values_list("rater_id", "amount"))
    lines = []
    for row in raters_monitor(study=study):
        rater = row["rater"]
        if rater.pk not in submitted:
            continue
        amount = (
            rater_bonus(row, per_vote)
            if per_vote is not None
            else (per_rater if row["action"] == "approve" else Decimal("0"))
        )
        if amount > 0:
            lines.append({"rater": rater, "amount": amount.quantize(Decimal("0.01")), "already": already.get(rater.pk)})
    to_pay = [line for line in lines if line["already"] is None]
    return {"lines": lines, "count": len(to_pay), "total": sum((line["amount"] for line in to_pay), Decimal("0.00"))}


def prolific_bonuses_pay(
    *, study: Study, user: AbstractBaseUser | None, per_vote: Decimal | None = None, per_rater: Decimal | None = None
) -> BonusBatch | None:
    """Pay the bonuses the preview shows, once. Each rater's bonus is recorded first, in its own
    short transaction (a unique constraint per rater: a second press, a retried task or another
    staff member at the same time records none for a rater who has one, and pays nothing for
    them); then Prolific's bulk bonus payment is set up and paid by the one caller whose update
    claims the batch. None when there is nothing left to pay. A failure Prolific answers leaves
    nothing paid and the raters free to be paid again; a pay call with no answer (a timeout) may
    have paid: its batch stays "unknown" and its raters taken, to be checked on Prolific."""
    preview = prolific_bonuses_preview(study=study, per_vote=per_vote, per_rater=per_rater)
    link = prolific_link(study=study)
    user = user if user is not None and user.is_authenticated else None
    with transaction.atomic():
        batch = BonusBatch.objects.create(prolific_study=link, requested_by=user)
        Bonus.objects.bulk_create(
            [
                Bonus(
                    batch=batch, rater=line["rater"], participant_id=line["rater"].participant_id, amount=line["amount"]
                )
                for line in preview["lines"]
                if line["already"] is None
            ],
            ignore_conflicts=True,  # taken by another batch meanwhile: not ours to pay
        )
        mine = list(batch.bonuses.all())
        if not mine:
            batch.delete()
            return None
    client = ProlificClient()
    csv_bonuses = "".join(f"{bonus.participant_id},{bonus.amount}\n" for bonus in mine)
    total = sum((bonus.amount for bonus in mine), Decimal("0"))
    try:
        answer = _logged(
            study,
            user,
            "bonuses set up",
            lambda: client.bonuses_set_up(study_id=link.prolific_id, csv_bonuses=csv_bonuses),
            lambda a: f"{len(mine)} bonuses, {total} (+ fees: {a.get('total_amount')}), bulk {a.get('id')}",
        )
    except ProlificError as exc:
        _batch_failed(batch, exc)  # a set-up pays nothing, answered or not
        raise
    BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.REQUESTED).update(
        state=BonusBatch.State.SET_UP, bulk_id=answer["id"]
    )
    # The claim: exactly one caller moves a set-up batch to paying, and only it pays.
    if not BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.SET_UP).update(state=BonusBatch.State.PAYING):
        batch.refresh_from_db()
        return batch
    try:
        _logged(
            study,
            user,
            "bonuses pay",
            lambda: client.bonuses_pay(answer["id"]),
            lambda a: f"paid {len(mine)} bonuses, {total}",
        )
    except ProlificError as exc:
        if exc.answered:
            _batch_failed(batch, exc)
        else:
            BonusBatch.objects.filter(pk=batch.pk).update(state=BonusBatch.State.UNKNOWN, error=str(exc)[:2000])
        raise
    BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.PAYING).update(
        state=BonusBatch.State.PAID, paid_at=timezone.now()
    )
    batch.refresh_from_db()
    return batch


def _batch_failed(batch: BonusBatch, exc: ProlificError) -> None:
    """Prolific did not pay the batch: its raters are free to be paid again, the batch stays as
    the record of the failure."""
    with transaction.atomic():
        Bonus.objects.filter(batch=batch).delete()
        BonusBatch.objects.filter(pk=batch.pk).update(state=BonusBatch.State.FAILED, error=str(exc)[:2000])
