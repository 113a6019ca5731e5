"""Analysis workflows over the database: analyse a study, simulate judges, monitor and pay raters,
plan a study's power. Views, commands and the admin call these; the maths lives in plain modules.
(Importing votes is `vote_import.py`.)"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction
from functools import partial

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from analysis import consensus, lc_alpaca, loader, report, simulate, tasks
from analysis.frame import Filters, apply_filters, by_judge
from analysis.models import StudyReport
from analysis.reports import (
    Results,
    report_store,
    report_version,
    request_of,
    results_of,
    stored_view,
    study_groups,
    with_scheme_labels,
)
from annotations import context as context_text
from annotations.models import (
    Judge,
    Rater,
    Study,
    Vote,
)
from biasstudy.queue import QueueUnavailable, enqueue_on_commit
from judges.models import JudgeRun

log = logging.getLogger(__name__)


def study_subsets(*, study: Study) -> list[str]:
    """The subsets the study's questions come from (imported data sets such as LLMBar), sorted."""
    named = study.questions.exclude(subset="").values_list("subset", flat=True)
    return sorted(set(named))


def study_runs(*, study: Study) -> list[int]:
    """Ids of the study's LLM judge runs (what the "runs" filter may pick)."""
    return list(JudgeRun.objects.filter(study=study).order_by("id").values_list("id", flat=True))


def study_analyze(*, study: Study, filters: Filters | None = None, options: report.Options | None = None) -> dict:
    """The study's current report: the stored one while the data it was computed from is
    unchanged, else computed now, whatever the study's size (``manage.py analyze`` waits)."""
    return study_results(study=study, filters=filters, options=options, wait=True).report


# A refresh task queued (or running) longer than this is taken for lost (its worker died): the
# next request queues another.
REFRESH_LOST_AFTER = timedelta(minutes=10)


def study_results(
    *, study: Study, filters: Filters | None = None, options: report.Options | None = None, wait: bool = False
) -> Results:
    """The study's report for these filters and options, stored (one ``StudyReport`` per study,
    filters and options: its default view and its last few others, ``reports.stored_view``) and
    computed again when ``report_version`` (the study's data version) has moved on: at once for
    a study of up to ``settings.ANALYSIS_BACKGROUND_VOTES`` votes (or with ``wait``); above that
    by the ``report_refresh`` task, queued once, while the last report is returned, marked
    ``updating``. Whether the stored one is current costs two queries, whatever the study's size."""
    filters, options = filters or Filters(), with_scheme_labels(options)
    version = report_version(study)
    stored = stored_view(study=study, request=request_of(filters, options))
    if stored.body and stored.version == version:
        return results_of(stored, updating=False)
    # The study's size as of its last report (counting its votes costs as much as a page).
    n_votes = stored.n_votes if stored.body else Vote.objects.filter(item__study=study).count()
    if wait or n_votes <= settings.ANALYSIS_BACKGROUND_VOTES:
        report_store(stored, version=version, filters=filters, options=options)
        return results_of(stored, updating=False)
    claimed = (
        StudyReport.objects.filter(pk=stored.pk)
        .filter(Q(refresh_queued_at__isnull=True) | Q(refresh_queued_at__lt=timezone.now() - REFRESH_LOST_AFTER))
        .update(refresh_queued_at=timezone.now())
    )
    if claimed:
        # Outside a transaction (a page, the API) the job is queued here and now. A refused one
        # has its claim released, so the next request (the page asks again every 10 s) queues it
        # again; this one shows the last report, marked updating, as while a refresh runs.
        with contextlib.suppress(QueueUnavailable):
            enqueue_on_commit(
                partial(tasks.report_refresh.enqueue, report_id=stored.pk),
                undo=partial(StudyReport.objects.filter(pk=stored.pk).update, refresh_queued_at=None),
                what=f"the refresh of {study.slug}'s report",
            )
    return results_of(stored, updating=True)


def judge_simulate(
    *, study: Study, name: str, params: simulate.JudgeParams, votes_per_item: int | None = None, seed: int = 0
) -> tuple[Judge, int]:
    """Create (or reuse) a simulated judge with ``params`` and let it vote on every scored item
    of ``study``, ``votes_per_item`` times each, balanced over orders. Returns (judge, votes)."""
    k = votes_per_item or study.votes_per_item
    items = loader.study_items(study)
    items = items[~items["is_gold"]]
    # A simulated LLM judge: label order counterbalanced against display order, as in a real run.
    sim = simulate.simulate_votes(items, params, votes_per_item=k, seed=seed, counterbalance_labels=True)
    with transaction.atomic():
        judge, _ = Judge.objects.update_or_create(
            name=name, study=None, defaults={"kind": Judge.Kind.SIMULATED, "params": params.as_dict()}
        )
        start = (
            Vote.objects.filter(judge=judge, item__study=study)
            .order_by("-round")
            .values_list("round", flat=True)
            .first()
        )
        offset = 0 if start is None else start + 1
        Vote.objects.bulk_create(
            [
                Vote(
                    item_id=int(r.item_id),
                    judge=judge,
                    round=int(r.round) + offset,
                    shown_first=r.shown_first,
                    label_scheme=r.label_scheme,
                    labels_swapped=bool(r.labels_swapped),
                    choice_shown=r.choice_shown,
                    choice=r.choice,
                    meta={"simulated": True, "seed": seed},
                )
                for r in sim.itertuples(index=False)
            ],
            batch_size=2000,
        )
        Study.objects.filter(pk=study.pk).data_changed()  # bulk_create sends no signal
    return judge, len(sim)


def raters_simulate(
    *,
    study: Study,
    raters: int,
    params: simulate.JudgeParams,
    votes_per_item: int | None = None,
    seed: int = 0,
    flag_share: float = 0.0,
    not_familiar_rate: float = 0.03,
) -> int:
    """Fill the study's human pool with simulated people (demo data and the rater monitor):
    ``raters`` raters with pseudonymous ids SIM-0001…, each item voted by distinct raters.
    Returns the number of votes written."""
    k = votes_per_item or study.votes_per_item
    if params.label:
        raise ValueError("people see the answers left and right, under no labels: a label bias is for a judge")
    if raters < k:
        raise ValueError(f"need at least {k} raters for {k} votes per item (a rater votes once per item)")
    items = loader.study_items(study)
    items = items[~items["is_gold"]]
    params = simulate.JudgeParams(**{**params.as_dict(), "median_ms": params.median_ms or 9000})
    sim = simulate.simulate_votes(items, params, votes_per_item=k, seed=seed)
    rng = np.random.default_rng(seed + 1)
    # Each item's k votes go to k different raters.
    per_item = np.argsort(rng.random((len(items), raters)), axis=1)[:, :k].ravel()
    now = timezone.now()
    spread = pd.to_timedelta(rng.uniform(0, 3 * 24 * 3600, len(sim)), unit="s")
    nf = rng.random(len(sim)) < not_familiar_rate
    with transaction.atomic():
        pool, _ = Judge.objects.get_or_create(study=study, kind=Judge.Kind.HUMAN, defaults={"name": "Humans"})
        people = []
        for i in range(raters):
            pid = f"SIM-{seed:02d}-{i + 1:04d}"
            flagged = i < round(raters * flag_share)
            rater, _ = Rater.objects.get_or_create(
                study=study,
                participant_id=pid,
                defaults={
                    "target": study.target_per_rater,
                    "flagged": flagged,
                    "flag_reason": "simulated careless rater" if flagged else "",
                    "gold_seen": 5,
                    "gold_correct": 2 if flagged else 5,
                },
            )
            people.append(rater)
        Vote.objects.bulk_create(
            [
                Vote(
                    item_id=int(r.item_id),
                    judge=pool,
                    rater=people[int(who)],
                    shown_first=r.shown_first,
                    choice_shown=None if is_nf and j % 2 else r.choice_shown,
                    choice=None if is_nf and j % 2 else r.choice,
                    not_familiar=bool(is_nf),
                    client_ms=int(r.client_ms),
                    server_ms=int(r.client_ms) + 400,
                    received_at=now - delay,
                    parse_status=Vote.Parse.OK,
                )
                for j, (r, who, is_nf, delay) in enumerate(
                    zip(sim.itertuples(index=False), per_item, nf, spread, strict=True)
                )
            ],
            batch_size=2000,
        )
        Study.objects.filter(pk=study.pk).data_changed()  # bulk_create sends no signal
    return len(sim)


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


MAX_SIMULATED_VOTES_PER_ITEM = 24
# The simulation's cost is the votes it draws: questions × (kinds + 1 for the control) × 2h votes
# per item, h >= 12 (simulate.asr_interval_table). The form bounds the questions and the votes per
# item, not the study's kinds: 100 kinds at the form's maxima drew 9.7M votes and took 100 s in a
# web request. This bounds the votes whatever the kinds: the form's maxima with three kinds
# (2,000 × 4 × 48). Past it, one kind of each sort (alike_kinds) is simulated for all of its sort.
MAX_SIMULATED_VOTES = 384_000


# The recommendation: the fewest votes per item, an even number (half in each display order),
# whose widest ASR interval is within POWER_TOLERANCE of the width at POWER_REFERENCE votes per
# item (past it the questions, not the votes, set the width: the simulation's tail is noise).
# Wider than POWER_WIDE there, the page says that more questions, not votes, would narrow it.
POWER_TOLERANCE = 0.02
POWER_REFERENCE = 12
POWER_WIDE = 0.2


def power_groups(*, study: Study) -> dict[str, tuple[str, int]]:
    """The study's perturbation groups that raters are handed, for the simulation, ``{slug:
    (semantics, words added)}`` (the built-in kinds keep the lengths they usually add); the
    three built-in ones for a study that has none yet. A kind whose items go to judges only
    (`ComparisonItem.for_raters`: a self-enhancement context names the judge's own family, or a
    vote import kept them from raters) costs no rater a vote, so it is not in the rater budget."""
    _, semantics = study_groups(study=study)
    if not semantics:
        return dict(simulate.SYNTHETIC_GROUPS)
    # The rule of ComparisonItem.for_raters, read per (kind, context) rather than per item.
    offered = (
        study.items.filter(kind__isnull=False, offered_to_raters=True, question__is_gold=False)
        .order_by()
        .values_list("kind__slug", "answer_a2__context")
        .distinct()
    )
    for_raters = {slug for slug, context in offered if not context_text.names_judge_family(context)}
    builtin = simulate.SYNTHETIC_GROUPS
    return {g: (sem, builtin.get(g, (sem, 0))[1]) for g, sem in semantics.items() if g in for_raters}


def power_defaults(*, study: Study) -> dict:
    """Where the "how many votes" page starts: the study's questions (the form's bounds kept),
    the raters who have come through its link so far or, before anyone has, as many as its
    votes per item need, and its items per rater."""
    questions = min(max(study.questions.filter(is_gold=False).count(), 10), 2000)
    items = questions * (len(power_groups(study=study)) + 1)
    needed = -(-study.votes_per_item * items // max(study.target_per_rater, 1))
    so_far = Rater.objects.filter(study=study).crowd().count()
    return {
        "n_questions": questions,
        "raters": min(so_far or needed, 10_000),
        "items_per_rater": min(study.target_per_rater, 1000),
        "susceptibility": 0.5,
        "noise": 1.0,
        "tie_rate": 0.15,
    }


def power_table(
    *,
    n_questions: int,
    raters: int,
    items_per_rater: int,
    susceptibility: float,
    noise: float,
    tie_rate: float,
    groups: dict[str, tuple[str, int]] | None = None,
    pay_per_rater: Decimal | None = None,
) -> dict:
    """Interval widths of ASR for several votes-per-item, including what the given raters
    supply (raters × items per rater spread over the questions' items), for the design's
    perturbation ``groups`` (simulate.synthetic_items). The width falls as votes per item grow,
    towards what the number of questions allows (simulate.asr_interval_widths). The
    recommendation is the fewest votes per item within POWER_TOLERANCE of that floor, with the
    raters it takes and, given ``pay_per_rater``, what they cost.

    The simulation draws at most MAX_SIMULATED_VOTES votes (``simulated_votes`` says how many
    it drew): when the kinds do not all fit, one kind of each sort is simulated for the kinds
    alike to it (``stands_for``, alike_kinds)."""
    groups = dict(simulate.SYNTHETIC_GROUPS) if groups is None else groups
    n_items = n_questions * (len(groups) + 1)
    # What the raters supply, as it is: 0.24 means most items get no vote at all.
    supplied = raters * items_per_rater / n_items
    # The simulation costs in proportion to the votes it draws: 10,000 raters × 1,000 items
    # supplied 1,250 votes per item and took 75 s in a web request. Past MAX_SIMULATED_VOTES_PER_ITEM
    # the width hardly moves (the questions bound it), so the row shown is that many; under one
    # vote per item no row is what they supply.
    most = MAX_SIMULATED_VOTES_PER_ITEM
    supplied_row = min(int(supplied), most) if supplied >= 1 else None
    ks = sorted({1, 2, 4, 6, 8, POWER_REFERENCE} | ({supplied_row} if supplied_row else set()))
    params = simulate.JudgeParams(
        tie_rate=tie_rate,
        noise=noise,
        susceptibility={g: -susceptibility if sem == "degrading" else susceptibility for g, (sem, _) in groups.items()},
    )
    votes_per_kind = n_questions * 2 * max(POWER_REFERENCE, *ks)
    fits = max(1, MAX_SIMULATED_VOTES // votes_per_kind - 1)  # kinds besides the control
    stands_for = {g: [] for g in groups}
    if len(groups) > fits:
        stands_for = dict(list(alike_kinds(groups, params).items())[:fits])
    simulated = {g: groups[g] for g in stands_for}
    table = simulate.asr_interval_table(n_questions=n_questions, votes_per_item=ks, params=params, groups=simulated)
    rows = table.rows
    widest = {
        r["votes_per_item"]: max((r[g]["width"] for g in simulated if r[g]["width"] is not None), default=None)
        for r in rows
    }
    recommended = None
    if (floor := widest[POWER_REFERENCE]) is not None:
        even = [k for k in ks if k % 2 == 0 and k <= POWER_REFERENCE and widest[k] is not None]
        k = next(k for k in even if widest[k] <= floor + POWER_TOLERANCE)
        raters_needed = -(-k * n_items // items_per_rater)
        recommended = {
            "votes_per_item": k,
            "width": widest[k],
            "floor": floor,
            "reference": POWER_REFERENCE,
            "tolerance_points": round(100 * POWER_TOLERANCE),
            "questions_limit": floor > POWER_WIDE,
            "raters": raters_needed,
            "votes": k * n_items,
            "pay_per_rater": pay_per_rater,
            "cost": raters_needed * pay_per_rater if pay_per_rater is not None else None,
        }
    left_out = [g for g in groups if g not in simulated and not any(g in alike for alike in stands_for.values())]
    return {
        "rows": rows,
        "supplied": round(supplied, 2),
        "simulated": supplied_row,
        "capped": supplied >= most + 1,  # the table stops short of what they supply
        "groups": list(simulated),  # the kinds simulated: the table's columns
        "kinds": len(groups),
        # When not every kind was simulated: each simulated kind with the kinds it stands for,
        # and any kind of a sort that did not fit (none while the judge has no length preference).
        "stands_for": {g: alike for g, alike in stands_for.items() if alike} if len(simulated) < len(groups) else {},
        "left_out": left_out,
        "simulated_votes": table.votes_drawn,
        "votes_budget": MAX_SIMULATED_VOTES,
        "items": n_items,
        "recommended": recommended,
    }


def alike_kinds(groups: dict[str, tuple[str, int]], params: simulate.JudgeParams) -> dict[str, list[str]]:
    """The kinds whose ASR the simulation cannot tell apart, by the first of each sort: the
    same semantics (which ASR formula), the same pull (susceptibility) and, when the judge
    prefers length, the same words added. Their intervals differ only by simulation noise, so
    one of each sort is simulated for them all."""
    sorts: dict[tuple, list[str]] = {}
    for g, (semantics, words) in groups.items():
        key = (semantics, params.susceptibility.get(g, 0.0), words if params.length_per_token else 0)
        sorts.setdefault(key, []).append(g)
    return {alike[0]: alike[1:] for alike in sorts.values()}


def study_lc_alpaca(*, study: Study, filters: Filters | None = None) -> dict[str, lc_alpaca.AlpacaLC]:
    """Per judge, the AlpacaEval-compatible LC win rates of every model against the study's
    baseline A1 (analysis.lc_alpaca), from the judge's counted votes: a study of
    ``import_votes --format alpaca_eval``, or any study whose A2 answers name their system."""
    counted, _, _ = apply_filters(loader.study_frame(study), filters or Filters())
    return {
        judge: lc_alpaca.fit(*lc_alpaca.frame_inputs(votes)) for judge, votes in by_judge(counted).items() if len(votes)
    }
