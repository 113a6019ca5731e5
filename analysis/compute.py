"""Everything the dashboard, the exports and ``manage.py analyze --json`` show, from one frame.

``analyze(frame, ...)`` returns one JSON-ready dict: its ``rows`` are the metric table
(``analysis.rows``: one row per figure, made by every registered metric of
``analysis.judge_metrics`` and ``analysis.study_metrics``), beside what the figures were computed
from (filters, conventions, groups, the judges and their vote counts). It only reads the frame;
the loader builds it. The report as stored and read by the outputs is ``stored_reports.py`` and
``current_report.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from analysis import (
    alttest,
    consistency,
    content_blind,
    lc,
    metrics,
    mixed_effects,
    ppi,  # noqa: F401 (registers people's rates by prediction-powered inference)
    rating_metrics,  # noqa: F401 (registers the ratings' rows)
    rows,
    stats,
)
from analysis.frame import CONTROL, Filters, apply_filters, by_judge
from analysis.judge_metrics import JudgeData
from analysis.rows import JUDGE_METRICS, NUMBER, STUDY_METRICS, Figure
from analysis.study_metrics import RANDOM_JUDGE, StudyData


@dataclass
class Options:
    measure: str = "words"
    bin_width: int = 10
    # How a vote scores for "the longer answer wins": a key of metrics.VERBOSITY_CONVENTIONS.
    verbosity_convention: str = "tie_half"
    verbosity_groups: list[str] = field(default_factory=lambda: [CONTROL])
    bootstrap: int = 1000
    seed: int = 0
    by_bloom: bool = True
    lc_lambdas: tuple[float, ...] = lc.LAMBDAS
    # Label scheme → (label of the first answer, label of the second), for label bias.
    scheme_labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    # The Alternative Annotator Test (analysis.alttest): who the raters are sets its margin
    # epsilon (a key of alttest.EPSILON) unless alt_epsilon gives one; the authors' filters.
    alt_raters: str = alttest.DEFAULT_RATERS
    alt_epsilon: float | None = None
    alt_min_votes: int = alttest.MIN_VOTES
    alt_min_items: int = alttest.MIN_ITEMS
    # What the judge and the left-out rater are scored against (a key of alttest.REFERENCES).
    alt_reference: str = "raters"
    # Ratings of systems (analysis.ratings): the bootstrap ("prompt" clusters, or Arena's
    # "votes"), the anchor system ("" for the first), and the study's frozen style scaling
    # (analysis.ratings.Scaling as a dict; None: computed from the votes at hand).
    ratings_bootstrap: str = "prompt"
    ratings_anchor: str = ""
    style_scaling: dict | None = None

    @property
    def alt_test_epsilon(self) -> float:
        return self.alt_epsilon if self.alt_epsilon is not None else alttest.EPSILON[self.alt_raters]


def groups_and_semantics(frame: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """The perturbation groups present (gold and control left out) and each one's semantics."""
    pairs = frame.loc[~frame["is_gold"].to_numpy(), ["group", "semantics"]].drop_duplicates()
    semantics = {str(g): str(s) for g, s in zip(pairs["group"], pairs["semantics"], strict=False) if str(g) != CONTROL}
    return sorted(semantics), semantics


def human_like(kinds: dict[str, str], has_raters: dict[str, bool]) -> list[str]:
    """Judges whose votes come from people: the human pool, else imported judges with raters."""
    humans = [j for j, k in kinds.items() if k == "human"]
    return humans or [j for j, k in kinds.items() if k == "imported" and has_raters.get(j)]


def analyze(
    frame: pd.DataFrame,
    *,
    study: str,
    filters: Filters | None = None,
    options: Options | None = None,
    votes_per_item: int = 6,
    groups: list[str] | None = None,
    semantics: dict[str, str] | None = None,
) -> dict:
    """The report of the votes in ``frame``."""
    # Small dense products fight over cores when BLAS runs them threaded: one thread is faster.
    with threadpool_limits(1):
        return _analyze(
            frame,
            study=study,
            filters=filters or Filters(),
            options=options or Options(),
            votes_per_item=votes_per_item,
            groups=groups,
            semantics=semantics,
        )


def _analyze(frame, *, study, filters, options, votes_per_item, groups, semantics) -> dict:
    if groups is None or semantics is None:
        groups, semantics = groups_and_semantics(frame)
    counted, excluded, not_familiar = apply_filters(frame, filters)
    prefs = metrics.item_preferences(counted) if len(counted) else None
    # The bootstrap resamples clusters (a question, or every question of one prompt key).
    cluster_index = pd.Index(np.unique(counted["cluster_id"].to_numpy()))
    counts = stats.bootstrap_counts(len(cluster_index), reps=options.bootstrap, seed=options.seed)

    judge_kinds = {str(j): str(k) for j, k in frame[["judge", "judge_kind"]].drop_duplicates().itertuples(index=False)}
    has_raters = {
        str(j): bool(n) for j, n in (frame["rater"] != "").groupby(frame["judge"], observed=True).sum().items()
    }
    total_by_judge = frame.groupby("judge", observed=True).size()
    # Each judge's metrics read every column of its counted votes (a metric needs no list of
    # the columns it may read); the measures over every vote asked read ASKED_COLUMNS.
    asked = _asked(frame, filters, counted)
    counted_by_judge = by_judge(counted)
    asked_by_judge = counted_by_judge if asked is counted else by_judge(asked)
    # Order-swapped pairs and the LC fit's orientation are counted for all judges at once (a
    # loop over 77 judges spent most of its time in pandas' per-call overhead), then split.
    pairs = consistency.swapped_pairs(asked)
    pairs_by_judge = dict(iter(pairs.groupby("judge", observed=True)))
    if prefs is not None:
        prefs = prefs.assign(orientation=_orientation(prefs))
    prefs_by_judge = dict(iter(prefs.groupby("judge", observed=True))) if prefs is not None else {}

    judges, table = [], []
    for name in sorted(judge_kinds):
        votes = counted_by_judge.get(name, counted.iloc[0:0])
        data = JudgeData(
            judge=name,
            kind=judge_kinds[name],
            votes=votes,
            prefs=prefs_by_judge.get(name),
            cluster_index=cluster_index,
            counts=counts,
            groups=groups,
            semantics=semantics,
            options=options,
            asked=asked_by_judge.get(name, asked.iloc[0:0]),
            pairs=pairs_by_judge.get(name, pairs.iloc[0:0]),
        )
        for rows_of in JUDGE_METRICS.values():
            table.extend(rows_of(data))
        judges.append(
            {
                "judge": name,
                "kind": judge_kinds[name],
                "n_votes": int(len(votes)),
                "n_votes_total": int(total_by_judge.get(name, 0)),
                # Which LLM runs these votes come from (filters.runs says how they were chosen).
                "runs": sorted(int(r) for r in np.unique(votes["run_id"].to_numpy(dtype=float)) if not np.isnan(r)),
            }
        )
    humans = human_like(judge_kinds, has_raters)
    nf = not_familiar[not_familiar["judge"].isin(humans).to_numpy()] if len(not_familiar) else not_familiar
    nf = nf[nf["choice"].notna().to_numpy()] if len(nf) else nf
    study_data = StudyData(
        counted=counted,
        prefs=prefs,
        prefs_by_judge=prefs_by_judge,
        not_familiar=nf,
        humans=humans,
        kinds=judge_kinds,
        cluster_index=cluster_index,
        counts=counts,
        groups=groups,
        semantics=semantics,
        votes_per_item=votes_per_item,
        options=options,
    )
    for rows_of in STUDY_METRICS.values():
        table.extend(rows_of(study_data))
    position_tests = _adjust_position_tests(table)
    # After the adjusted p-values, which the flag reads; a flagged judge is not ranked.
    table.extend(_position_dominated(table, judges))
    return {
        "study": study,
        "conventions": conventions(filters, options),
        "tests": {"position": position_tests},
        "filters": {
            **filters.as_dict(),
            "excluded": excluded,
            "n_votes_total": int(len(frame)),
            "n_votes_counted": int(len(counted)),
        },
        "measure": options.measure,
        "groups": [{"group": g, "semantics": semantics[g]} for g in groups],
        "judges": judges,
        "columns": list(rows.COLUMNS),
        "rows": table,
        # What each figure is (its label, section, format and definition), for any reader of the rows.
        "figures": rows.figures_of_report(table),
    }


P_ADJUST = "holm"


def conventions(filters: Filters, options: Options) -> dict:
    """Each choice the figures depend on, by name (docs/STATISTICS.md explains them)."""
    return {
        "item_preference": "sign of (votes A1 - votes A2); ties count 0",
        "longer_wins": options.verbosity_convention,
        "verbosity_bin_width": options.bin_width,
        **metrics.verbosity_convention_parts(options.verbosity_convention, seed=options.seed),
        "asr_base": "questions with both a control and a perturbed-item preference",
        "accuracy_base": "questions with a perturbed-item preference (the control's is not needed)",
        "runs": "picked" if filters.run_ids else filters.runs,
        "run_ids": list(filters.run_ids),
        "cluster_unit": (
            "question (the questions of one prompt key as one); and rater, two-way, for votes with a rater"
        ),
        "interval_level": 0.95,
        "interval_item_metrics": (
            f"percentile cluster bootstrap over the clusters ({options.bootstrap} resamples, seed {options.seed}); "
            "asr, accuracy, kappa and alpha"
        ),
        "interval_vote_metrics": (
            "Wilson on the effective number of votes p(1-p)/V, V cluster-robust (CR1) and never below the "
            "scored votes' own variance (a tie scored 1/2 varies less); position, longer wins, verbosity bins"
        ),
        "interval_fallback": (
            "Wilson on the number of clusters (questions, one prompt key's counting once) when the rate is 0 or 1 "
            "or all resamples agree"
        ),
        "content_blind": (
            "a judge voting first / tie / second with the judge's own position shares and no regard for the "
            f"answers, on its design; {content_blind.CONVENTION} (seed {options.seed}); a judge is ranked in a "
            f"column only where its figure differs from it (two-sided Monte Carlo p < {content_blind.ALPHA:g})"
        ),
        "position_test": metrics.POSITION_TEST,
        "p_adjust": P_ADJUST,
        "position_consistency": (
            "order-swapped pairs (each vote shown A1 first with each shown A2 first on the item) of votes "
            "without a rater; an unread verdict does not survive the swap"
        ),
        "gold_accuracy": "votes on items with a gold label; an unread verdict is not correct",
        "repetition_stability": "mean share of the most frequent verdict over requests asked more than once",
        "vote_pair_agreement": "Zheng et al.: every pair of votes on an item; S1 with ties, S2 without",
        "self_preference": "own family's answer scored 1, tie 1/2; vs judges outside the family on the same items",
        "mixed_effects": mixed_effects.METHOD,
        "alt_test": (
            f"Calderon, Reichart and Dror 2025: each rater left out in turn, judge and rater scored against "
            f"{alttest.REFERENCES[options.alt_reference]} on each item; one-sided paired t-test at epsilon "
            f"{options.alt_test_epsilon:g} ({'set' if options.alt_epsilon is not None else options.alt_raters + ' raters'}), "
            f"Benjamini-Yekutieli at q {alttest.Q_FDR:g} over the raters tested; items with "
            f"{options.alt_min_votes}+ human votes and the judge's item preference; raters tested with "
            f"{options.alt_min_items}+ such items, {alttest.MIN_TESTED}+ tested for a verdict; passes at a "
            f"winning rate of 0.5 or more"
        ),
    }


def _adjust_position_tests(table: list[dict]) -> dict:
    """Holm-adjust every first-vs-second test the report shows (judges overall, judges × Bloom
    levels, Human-NF) as one family: ``p_adjusted`` of each ``position_diff`` row with a p-value."""
    family = [r for r in table if r["metric"] == "position_diff" and r["judge"] != RANDOM_JUDGE]
    adjusted = stats.holm([r["p_value"] for r in family])
    for r, p in zip(family, adjusted, strict=True):
        r["p_adjusted"] = p
    return {"method": metrics.POSITION_TEST, "adjust": P_ADJUST, "m": sum(p is not None for p in adjusted)}


POSITION_DOMINATED = rows.declare(
    Figure(
        "position_dominated",
        "Position-dominated",
        "table1",
        NUMBER,
        "1 where the judge's votes follow the display order (a large, significant Diff) or most of its items "
        "are tied, with the reasons in the note: such a judge is not ranked; 0 otherwise.",
        "votes",
    )
)


def _position_dominated(table: list[dict], judges: list[dict]) -> list[dict]:
    """A ``position_dominated`` row per judge: 1 with the reasons (note) where its votes follow
    the display order or most of its item preferences are ties (metrics.position_dominated),
    else 0. A flagged judge is not ranked."""
    out, of_judge = [], rows.by_judge(table)
    for j in judges:
        mine = of_judge.get(j["judge"], [])
        diff = rows.one(mine, metric="position_diff", bloom="")
        ties = rows.as_rate(rows.one(mine, metric="items_tied"))
        position = {"diff": diff["estimate"], "p_adjusted": diff["p_adjusted"]} if diff else {}
        reasons = metrics.position_dominated(position, ties)
        out.append(
            rows.row(
                j["judge"],
                j["kind"],
                "position_dominated",
                float(bool(reasons)),
                n=j["n_votes"],
                note="; ".join(reasons),
            )
        )
    return out


# What the consistency and gold-label measures read (analysis.consistency).
ASKED_COLUMNS = [
    "judge",
    "item_id",
    "question_id",
    "cluster_id",
    "rater",
    "shown_first",
    "order_known",
    "choice",
    "label_scheme",
    "labels_swapped",
    "gold_label",
    "subset",
]


def _asked(frame: pd.DataFrame, filters: Filters, counted: pd.DataFrame) -> pd.DataFrame:
    """The counted votes plus those whose verdict could not be read (the gold-label and
    consistency measures count such a verdict as wrong, and as not surviving the swap): their
    ``ASKED_COLUMNS``, or ``counted`` itself when every verdict was read."""
    # numpy's comparison of the text column: pandas' costs five times more on a million votes.
    if not (frame["parse_status"].to_numpy() == "invalid").any():
        return counted
    kept, _, _ = apply_filters(frame, filters, drop_no_choice=False)
    asked = kept[kept["choice"].notna().to_numpy() | (kept["parse_status"].astype(str) == "invalid").to_numpy()]
    return asked[ASKED_COLUMNS]


def _orientation(prefs: pd.DataFrame) -> pd.Series:
    """+1 where an item's A2 is (or was made from) its question's control A2, −1 where it is
    the control's A1, 0 where the judge has no preference on the question's control item (see
    metrics.oriented_pairs)."""
    judge_code, _ = pd.factorize(prefs["judge"].astype(str) if "judge" in prefs.columns else np.zeros(len(prefs)))
    key = pd.Series(judge_code.astype(np.int64) * (int(prefs["question_id"].to_numpy().max(initial=0)) + 1)) + prefs[
        "question_id"
    ].to_numpy(dtype=np.int64)
    is_ctrl = (prefs["group"] == CONTROL).to_numpy()
    ctrl = prefs[is_ctrl].assign(key=key.to_numpy()[is_ctrl]).drop_duplicates("key").set_index("key")
    c_a1 = ctrl["a1_root"].reindex(key).to_numpy()
    c_a2 = ctrl["a2_root"].reindex(key).to_numpy()
    a2 = prefs["a2_root"].to_numpy()
    return pd.Series(np.where(a2 == c_a2, 1.0, np.where(a2 == c_a1, -1.0, 0.0)), index=prefs.index)
