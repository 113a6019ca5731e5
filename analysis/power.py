"""Power planning, the "how many votes do I need" page: the interval widths of ASR a design would
give, simulated (``power_table``), where the page starts for a study (``power_defaults``) and
the perturbation groups it simulates (``power_groups``)."""

from __future__ import annotations

from decimal import Decimal

from analysis import simulate
from analysis.stored_reports import study_groups
from annotations import context as context_text
from annotations.models import Rater, Study

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
