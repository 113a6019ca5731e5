"""The rater monitor and payment: each rater who came through the study link with their votes, times,
attention checks, reliability, status and the suggested action for payment (``raters_monitor``;
the page, its CSV and the payment file read it), and the people imported votes brought
(``imported_people``)."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
from django.db.models import Count

from analysis import consensus
from annotations.models import Judge, Rater, Study, Vote

# The status of a rater who failed the attention checks (the rater monitor marks it).
FAILED_ATTENTION_CHECKS = "failed attention checks"


def rater_status(rater: Rater) -> str:
    """finished (shown their completion code), failed attention checks (flagged for them), or
    partial (left, or still working, before the end)."""
    if rater.failed_attention_checks:
        return FAILED_ATTENTION_CHECKS
    return "finished" if rater.finished_at else "partial"


# A finished rater with more than this share of their votes too fast (faster than the study's
# threshold: they cannot have read both answers) is suggested for review, not approval. Their
# too-fast votes counted toward their target, as every answer does (annotations.completion).
TOO_FAST_REVIEW_SHARE = Fraction(1, 3)


def suggested_action(rater: Rater, status: str, votes: int, too_fast: int) -> tuple[str, str]:
    """What to do with the rater's submission on the platform, and why: reject who failed the
    attention checks, approve who finished, unless flagged by hand or too fast too often; the
    rest (left before the end) is for a person to review."""
    if status == FAILED_ATTENTION_CHECKS:
        return "reject", "failed the attention checks"
    if status != "finished":
        return "review", "did not finish"
    if rater.flagged:
        return "review", f"flagged: {rater.flag_reason}" if rater.flag_reason else "flagged"
    if too_fast > votes * TOO_FAST_REVIEW_SHARE:
        return "review", f"{too_fast} of {votes} votes too fast"
    return "approve", ""


CONSENSUS_LABEL = {"a1": 1, "a2": -1, "tie": 0}


def raters_monitor(*, study: Study) -> list[dict]:
    """Per rater: votes (counted, too fast, not familiar), median response time, share of left
    choices, tie rate, attention-check accuracy, flags, completion status and total time (entry
    to completion code, or to the last vote for those who have not finished), and the suggested
    action for payment with its reason (`suggested_action`), so careless raters can be replaced
    in time and everyone paid right; and each rater's reliability as the Dawid-Skene consensus
    of the crowd's votes estimates it (`analysis.consensus`: the probability that their label is
    the item's class, over their votes with a choice, neither too fast nor not familiar;
    `reliability_n`: how many). Only raters who came through the study link: people whose
    votes were imported are summed up by `imported_people`."""
    columns = ["rater_id", "item_id", "client_ms", "choice_shown", "choice", "not_familiar", "meta"]
    crowd = Vote.objects.filter(item__study=study, rater__isnull=False).exclude(judge__kind=Judge.Kind.IMPORTED)
    votes = pd.DataFrame(list(crowd.values_list(*columns)), columns=columns)
    stats_by_rater = {}
    if len(votes):
        votes["client_ms"] = votes["client_ms"].astype(float)
        assignment = votes["meta"].map(lambda m: (m or {}).get("assignment", {}))
        votes["too_fast"] = assignment.map(lambda a: bool(a.get("too_fast", False)))
        votes["counted"] = assignment.map(lambda a: bool(a.get("counted", False)))
        grouped = votes.groupby("rater_id")
        decided = votes[votes["choice_shown"].notna()]
        stats_by_rater = {
            rid: {
                "votes": int(len(g)),
                "counted": int(g["counted"].sum()),
                "too_fast": int(g["too_fast"].sum()),
                "not_familiar_votes": int(g["not_familiar"].sum()),
                "median_ms": None if g["client_ms"].isna().all() else float(g["client_ms"].median()),
                "not_familiar": float(g["not_familiar"].mean()),
            }
            for rid, g in grouped
        }
        for rid, g in decided.groupby("rater_id"):
            shown = g["choice_shown"]
            stats_by_rater[rid]["left"] = float((shown == "first").mean())
            stats_by_rater[rid]["tie"] = float((shown == "tie").mean())
        labelled = votes[votes["choice"].notna() & ~votes["not_familiar"] & ~votes["too_fast"]]
        if len(labelled):
            # A rater gets an item once: one label per rater and item, as dawid_skene wants.
            label = labelled["choice"].map(CONSENSUS_LABEL).to_numpy()
            found = consensus.dawid_skene(labelled["item_id"].to_numpy(), labelled["rater_id"].to_numpy(), label)
            for rid, reliability, n in zip(found.rater_ids, found.reliability, found.n_labels, strict=True):
                stats_by_rater[rid] |= {"reliability": float(reliability), "reliability_n": int(n)}
    rows = []
    for rater in Rater.objects.filter(study=study).crowd().order_by("participant_id"):
        s = stats_by_rater.get(rater.id, {})
        end = rater.finished_at or rater.last_seen_at
        status = rater_status(rater)
        action, because = suggested_action(rater, status, s.get("votes", 0), s.get("too_fast", 0))
        rows.append(
            {
                "rater": rater,
                "votes": s.get("votes", 0),
                "counted": s.get("counted", 0),
                "too_fast": s.get("too_fast", 0),
                "not_familiar_votes": s.get("not_familiar_votes", 0),
                "median_ms": s.get("median_ms"),
                "left": s.get("left"),
                "tie": s.get("tie"),
                "not_familiar": s.get("not_familiar"),
                "reliability": s.get("reliability"),
                "reliability_n": s.get("reliability_n", 0),
                "gold": rater.gold_correct / rater.gold_seen if rater.gold_seen else None,
                "below_gold": bool(rater.gold_seen) and rater.gold_correct / rater.gold_seen < study.gold_min_accuracy,
                "status": status,
                "action": action,
                "action_because": because,
                "total_seconds": round((end - rater.created_at).total_seconds()) if end else None,
            }
        )
    return rows


def imported_people(*, study: Study) -> list[dict]:
    """Per imported judge with people (import_votes), how many people and votes it brought.
    They did not come through the study link: no slot, no completion code, no payment here."""
    rows = (
        Vote.objects.filter(item__study=study, rater__isnull=False, judge__kind=Judge.Kind.IMPORTED)
        .values("judge__name")
        .annotate(people=Count("rater", distinct=True), votes=Count("id"))
        .order_by("judge__name")
    )
    return [{"judge": r["judge__name"], "people": r["people"], "votes": r["votes"]} for r in rows]
