"""Everything the dashboard, the exports and ``manage.py analyze --json`` show, from one frame.

``analyze(frame, ...)`` returns one JSON-ready dict (what `manage.py analyze --json` prints, with
more keys). It only reads the frame; the loaders build it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from analysis import consistency, labels, lc, metrics, selfpref, stats, vote_pairs
from analysis.frame import CONTROL, Filters, apply_filters, by_judge, is_in


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
    question_index = pd.Index(np.unique(counted["question_id"].to_numpy()))
    counts = stats.bootstrap_counts(len(question_index), reps=options.bootstrap, seed=options.seed)

    judge_kinds = {str(j): str(k) for j, k in frame[["judge", "judge_kind"]].drop_duplicates().itertuples(index=False)}
    has_raters = {
        str(j): bool(n) for j, n in (frame["rater"] != "").groupby(frame["judge"], observed=True).sum().items()
    }
    total_by_judge = frame.groupby("judge", observed=True).size()
    # Per-judge work needs a few columns only; splitting the slim frame copies far less.
    needed = [
        "judge",
        "item_id",
        "question_id",
        "rater",
        "run_id",
        "group",
        "bloom",
        "choice",
        "choice_shown",
        "shown_first",
        "order_known",
        "label_scheme",
        "labels_swapped",
        "prob_first",
        "prob_second",
        "prob_tie",
        f"len_a1_{options.measure}",
        f"len_a2_{options.measure}",
    ]
    asked = _asked(frame, filters, counted)
    if asked is counted:
        # The usual case, every vote's verdict read: one copy serves both measures.
        counted_by_judge = asked_by_judge = by_judge(counted[list(dict.fromkeys([*needed, *ASKED_COLUMNS]))])
    else:
        counted_by_judge, asked_by_judge = by_judge(counted[needed]), by_judge(asked)
    # Order-swapped pairs and the LC fit's orientation are counted for all judges at once (a
    # loop over 77 judges spent most of its time in pandas' per-call overhead), then split.
    pairs = consistency.swapped_pairs(asked)
    pairs_by_judge = dict(iter(pairs.groupby("judge", observed=True)))
    no_pairs = pairs.iloc[0:0]
    if prefs is not None:
        prefs = prefs.assign(orientation=_orientation(prefs))
    prefs_by_judge = dict(iter(prefs.groupby("judge", observed=True))) if prefs is not None else {}

    judges = []
    for name in sorted(judge_kinds):
        judges.append(
            _judge_report(
                name,
                judge_kinds[name],
                counted_by_judge.get(name, counted.iloc[0:0]),
                prefs_by_judge.get(name),
                question_index,
                counts,
                groups,
                semantics,
                options,
                total=int(total_by_judge.get(name, 0)),
                asked=asked_by_judge.get(name, asked.iloc[0:0]),
                pairs=pairs_by_judge.get(name, no_pairs),
            )
        )
    humans = human_like(judge_kinds, has_raters)
    nf = not_familiar[not_familiar["judge"].isin(humans).to_numpy()] if len(not_familiar) else not_familiar
    nf = nf[nf["choice"].notna().to_numpy()] if len(nf) else nf
    human_nf = metrics.position(nf)
    position_tests = _adjust_position_tests(judges, human_nf)
    # After the adjusted p-values, which the flag reads; a flagged judge is not ranked.
    for j in judges:
        j["position_dominated"] = metrics.position_dominated(j["position"], j["tie_share"])
    _add_ranks(judges, groups, semantics)
    agreement = _agreement(counted, prefs, prefs_by_judge, humans, judge_kinds, counts, question_index)
    # Agreement over vote pairs as Zheng et al. count it, and self-preference.
    agreement["vote_pairs"] = vote_pairs.vote_pair_agreement(
        counted, humans, counts=counts, question_index=question_index
    )
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
        "human_nf_position": human_nf,
        "random_judge": metrics.random_judge(votes_per_item, groups, semantics),
        "agreement": agreement,
        "self_preference": selfpref.self_preference(counted, counts=counts, question_index=question_index),
    }


P_ADJUST = "holm"


def conventions(filters: Filters, options: Options) -> dict:
    """Each choice the figures depend on, by name (docs/STATISTICS.md explains them)."""
    return {
        "item_preference": "sign of (votes A1 - votes A2); ties count 0",
        "longer_wins": options.verbosity_convention,
        **metrics.verbosity_convention_parts(options.verbosity_convention, seed=options.seed),
        "asr_base": "questions with both a control and a perturbed-item preference",
        "accuracy_base": "questions with a perturbed-item preference (the control's is not needed)",
        "runs": "picked" if filters.run_ids else filters.runs,
        "run_ids": list(filters.run_ids),
        "cluster_unit": "question; question and rater (two-way) for votes with a rater",
        "interval_level": 0.95,
        "interval_item_metrics": (
            f"percentile cluster bootstrap over questions ({options.bootstrap} resamples, seed {options.seed}); "
            "asr, accuracy, kappa and alpha"
        ),
        "interval_vote_metrics": (
            "Wilson on the effective number of votes p(1-p)/V, V cluster-robust (CR1); position, longer wins, "
            "verbosity bins"
        ),
        "interval_fallback": "Wilson on the number of questions when the rate is 0 or 1 or all resamples agree",
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
    }


def _adjust_position_tests(judges: list[dict], human_nf: dict) -> dict:
    """Holm-adjust every first-vs-second test the report shows (judges overall, judges × Bloom
    levels, Human-NF) as one family; each position gets ``p_adjusted`` beside ``p_value``."""
    family = [j["position"] for j in judges]
    family += [part["position"] for j in judges for part in j["by_bloom"].values()]
    family.append(human_nf)
    adjusted = stats.holm([pos.get("p_value") for pos in family])
    for pos, p in zip(family, adjusted, strict=True):
        pos["p_adjusted"] = p
    return {"method": metrics.POSITION_TEST, "adjust": P_ADJUST, "m": sum(p is not None for p in adjusted)}


# What the consistency and gold-label measures read (analysis.consistency).
ASKED_COLUMNS = [
    "judge",
    "item_id",
    "question_id",
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


def _judge_report(
    name, kind, votes, prefs, question_index, counts, groups, semantics, options, *, total, asked, pairs
) -> dict:
    asr, acc, by_bloom = {g: metrics.rate(0, 0, (None, None)) for g in groups}, {}, {}
    for g in groups:
        if semantics[g] == "degrading":
            acc[g] = metrics.rate(0, 0, (None, None))
    lc_part: dict = {key: {} for key in LC_KEYS}
    # Without perturbation groups there is no ASR or accuracy (nor their Bloom parts) to compute,
    # and no Bloom part for a position either.
    with_parts = prefs is not None and len(prefs) and groups
    overall_position, bloom_positions = metrics.positions(
        votes, by="bloom" if options.by_bloom and with_parts else None
    )
    if with_parts:
        indicators = metrics.asr_indicators(metrics.oriented_pairs(prefs))
        got_asr, got_acc, parts = metrics.asr_and_accuracy(
            indicators, question_index, counts, groups, semantics, by="bloom" if options.by_bloom else None
        )
        asr.update(got_asr)
        acc.update(got_acc)
        if parts:
            empty = metrics.positions(votes.iloc[0:0])[0]
            for bloom, (b_asr, b_acc) in parts.items():
                by_bloom[bloom] = {"asr": b_asr, "accuracy": b_acc, "position": bloom_positions.get(bloom, empty)}
    if prefs is not None and len(prefs):
        lc_part = _length_controlled(prefs, options)
    in_verbosity = is_in(votes["group"], options.verbosity_groups)
    # Without perturbation groups every vote is a control vote: no copy of the judge's votes.
    verbosity_votes = votes if in_verbosity.all() else votes[in_verbosity]
    return {
        "judge": name,
        "kind": kind,
        "n_votes": int(len(votes)),
        "n_votes_total": total,
        "asr": asr,
        "accuracy": acc,
        # Beside ASR: a tie counts as robust there, and a judge voting by position ties a lot.
        "tie_share": metrics.tie_share(prefs),
        "position": overall_position,
        "verbosity": metrics.verbosity(
            verbosity_votes,
            measure=options.measure,
            bin_width=options.bin_width,
            convention=options.verbosity_convention,
            seed=options.seed,
        ),
        **lc_part,
        "label_and_position": labels.label_and_position(votes, options.scheme_labels),
        "option_probs": metrics.option_probs(votes),
        "by_bloom": by_bloom,
        "position_consistency": consistency.position_consistency(asked, pairs=pairs),
        "repetition_stability": consistency.repetition_stability(asked),
        "gold_accuracy": consistency.gold_accuracy(asked, rater=metrics.rater_codes(asked), pairs=pairs),
        # Which LLM runs these votes come from (filters.runs says how they were chosen).
        "runs": sorted(int(r) for r in np.unique(votes["run_id"].to_numpy(dtype=float)) if not np.isnan(r)),
    }


LC_KEYS = (
    "lc_winrate",
    "lc_winrate_ci",
    "raw_winrate",
    "raw_winrate_ci",
    "lc_effect",
    "lc_effect_ci",
    "raw_effect",
    "raw_effect_ci",
    "length_slope",
    "lc_n",
)


def _length_controlled(prefs: pd.DataFrame, options: Options) -> dict:
    """Length-controlled and raw win rates of A2/A2p over A1 per group (analysis.lc), each with
    its interval, and the effects against the control."""
    n = prefs["n"].to_numpy(dtype=float)
    y = (prefs["n_a2"].to_numpy() + 0.5 * prefs["n_tie"].to_numpy()) / np.where(n > 0, n, 1)
    delta = prefs[f"len_a2_{options.measure}"].to_numpy(dtype=float) - prefs[f"len_a1_{options.measure}"].to_numpy(
        dtype=float
    )
    result = lc.fit(
        # lc.items reads the names as text itself.
        prefs["group"].to_numpy(),
        prefs["question_id"].to_numpy(),
        delta,
        y,
        n,
        # The report adds it for all judges at once; a caller with one judge's prefs may not have.
        orientation=(prefs["orientation"] if "orientation" in prefs.columns else _orientation(prefs)).to_numpy(),
        control=CONTROL,
        lambdas=options.lc_lambdas,
        seed=options.seed,
    )
    if result is None:
        return {key: {} for key in LC_KEYS}

    def ci(intervals: dict) -> dict:
        return {g: [lo, hi] for g, (lo, hi) in intervals.items()}

    return {
        "lc_winrate": result.lc_winrate,
        "lc_winrate_ci": ci(result.lc_ci),
        "raw_winrate": result.raw_winrate,
        "raw_winrate_ci": ci(result.raw_ci),
        # The effect of a perturbation: how much more the judge prefers A2p over A1 than A2 over A1.
        "lc_effect": result.lc_effect,
        "lc_effect_ci": ci(result.lc_effect_ci),
        "raw_effect": result.raw_effect,
        "raw_effect_ci": ci(result.raw_effect_ci),
        # One slope per judge, fitted on all its items (per unit of tanh(Δlen / scale)).
        "length_slope": {g: result.length_slope for g in result.groups},
        "lc_n": result.n_questions,
        "lc_lambda": result.lam,
    }


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


def _add_ranks(judges: list[dict], groups: list[str], semantics: dict[str, str]) -> None:
    """Ranks by ASR and accuracy among the judges not flagged as position-dominated (their
    rank is None: their ASR would put them first for voting by position)."""
    ranked = [j for j in judges if not j["position_dominated"]]
    for j in judges:
        j["ranks"] = {"asr": {}, "accuracy": {}}
    for g in groups:
        asr_ranks = stats.ranks({j["judge"]: j["asr"][g]["value"] for j in ranked}, lower_is_better=True)
        for j in judges:
            j["ranks"]["asr"][g] = asr_ranks.get(j["judge"])
        if semantics[g] == "degrading":
            acc_ranks = stats.ranks({j["judge"]: j["accuracy"][g]["value"] for j in ranked}, lower_is_better=False)
            for j in judges:
                j["ranks"]["accuracy"][g] = acc_ranks.get(j["judge"])


def _agreement(
    counted: pd.DataFrame,
    prefs: pd.DataFrame | None,
    prefs_by_judge: dict,
    humans: list[str],
    kinds: dict[str, str],
    counts: np.ndarray,
    question_index: pd.Index,
) -> dict:
    """Agreement among people (Fleiss' kappa, Krippendorff's alpha) and of each other judge
    with the human majority (Cohen's kappa), each with a cluster-bootstrap interval over
    questions (the same resamples as ASR), and Spearman's rho between judges."""
    out: dict = {"among_humans": None, "vs_human_majority": {}, "spearman": []}
    if prefs is None or not len(prefs):
        return out
    human_votes = counted[counted["judge"].isin(humans).to_numpy() & (counted["rater"] != "").to_numpy()]
    if len(human_votes):
        item_code, item_ids = pd.factorize(human_votes["item_id"])
        choice_code = human_votes["choice"].cat.codes.to_numpy()
        table = np.bincount(item_code * 3 + choice_code, minlength=3 * (item_code.max() + 1)).reshape(-1, 3)
        item_question = np.zeros(len(item_ids), dtype=np.int64)
        item_question[item_code] = question_index.get_indexer(human_votes["question_id"])
        fleiss_parts, alpha_parts = stats.agreement_parts(table, item_question, len(question_index))
        out["among_humans"] = {
            "krippendorff_alpha": stats.krippendorff_alpha_nominal(table),
            "krippendorff_alpha_ci": list(stats.bootstrap_stat_ci(counts, alpha_parts, stats.alpha_from_sums)),
            "fleiss_kappa": stats.fleiss_kappa(table),
            "fleiss_kappa_ci": list(stats.bootstrap_stat_ci(counts, fleiss_parts, stats.fleiss_from_sums)),
            "n_items": int((table.sum(axis=1) >= 2).sum()),
            "n_votes": int(len(human_votes)),
        }
    human_prefs = prefs[prefs["judge"].isin(humans).to_numpy()]
    if len(human_prefs):
        # The human majority per item: the same preference rule over all human votes on it.
        majority = human_prefs.groupby("item_id")[["n_a1", "n_a2"]].sum()
        majority_pref = pd.Series(metrics.preference(majority["n_a1"], majority["n_a2"]), index=majority.index)
        for name in sorted(kinds):
            if name in humans:
                continue
            own_prefs = prefs_by_judge.get(name, prefs.iloc[0:0]).set_index("item_id")
            own = own_prefs["pref"]
            common = own.index.intersection(majority_pref.index)
            a, b = own.loc[common].to_numpy(), majority_pref.loc[common].to_numpy()
            question = question_index.get_indexer(own_prefs.loc[common, "question_id"])
            # Items that agree per question, over the same question resamples as kappa's.
            agree = np.bincount(question, weights=(a == b), minlength=len(question_index))
            rated = np.bincount(question, minlength=len(question_index)).astype(np.float64)
            out["vs_human_majority"][name] = {
                "cohen_kappa": stats.cohen_kappa(a, b),
                "cohen_kappa_ci": list(
                    stats.bootstrap_stat_ci(
                        counts, stats.confusion_parts(a, b, question, len(question_index)), stats.cohen_from_sums
                    )
                ),
                "agreement": float((a == b).mean()) if len(common) else None,
                "agreement_ci": list(stats.bootstrap_ratio_ci(counts, agree[:, None], rated[:, None])[0]),
                "n": int(len(common)),
            }
    # Rank correlation of judges: Spearman of their mean item scores over the items both rated.
    item_code, _ = pd.factorize(prefs["item_id"])
    judge_code, names = pd.factorize(prefs["judge"].astype(str))
    mean_score = np.full((item_code.max() + 1, len(names)), np.nan)
    mean_score[item_code, judge_code] = (prefs["score"] / prefs["n"]).to_numpy()
    for i, j, rho, n in stats.spearman_pairs(mean_score):
        out["spearman"].append({"a": names[i], "b": names[j], "rho": rho, "n": n})
    return out
