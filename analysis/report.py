"""Everything the dashboard, the exports and ``manage.py analyze --json`` show, from one frame.

``analyze(frame, ...)`` returns one JSON-ready dict (the command-line contract of issue 6, with
more keys). It only reads the frame; the loaders build it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from analysis import labels, lc, metrics, stats
from analysis.frame import CONTROL, Filters, apply_filters


@dataclass
class Options:
    measure: str = "words"
    bin_width: int = 10
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
        str(j): bool(n)
        for j, n in frame.assign(r=frame["rater"].astype(str) != "").groupby("judge", observed=True)["r"].sum().items()
    }
    total_by_judge = frame.groupby("judge", observed=True).size()
    # Per-judge work needs a few columns only; splitting the slim frame copies far less.
    needed = [
        "judge",
        "group",
        "bloom",
        "choice",
        "choice_shown",
        "shown_first",
        "order_known",
        "label_scheme",
        "labels_swapped",
        "question_id",
        "option_probs",
        f"len_a1_{options.measure}",
        f"len_a2_{options.measure}",
    ]
    counted_by_judge = dict(iter(counted[needed].groupby("judge", observed=True)))
    prefs_by_judge = dict(iter(prefs.groupby("judge", observed=True))) if prefs is not None else {}

    judges = []
    for name in sorted(judge_kinds):
        votes = counted_by_judge.get(name, counted.iloc[0:0])
        jprefs = prefs_by_judge.get(name)
        judges.append(
            _judge_report(
                name,
                judge_kinds[name],
                votes,
                jprefs,
                question_index,
                counts,
                groups,
                semantics,
                options,
                total=int(total_by_judge.get(name, 0)),
            )
        )
    _add_ranks(judges, groups, semantics)

    humans = human_like(judge_kinds, has_raters)
    nf = not_familiar[not_familiar["judge"].isin(humans).to_numpy()] if len(not_familiar) else not_familiar
    nf = nf[nf["choice"].notna().to_numpy()] if len(nf) else nf
    return {
        "study": study,
        "filters": {
            **filters.as_dict(),
            "excluded": excluded,
            "n_votes_total": int(len(frame)),
            "n_votes_counted": int(len(counted)),
        },
        "measure": options.measure,
        "groups": [{"group": g, "semantics": semantics[g]} for g in groups],
        "judges": judges,
        "human_nf_position": metrics.position(nf),
        "random_judge": metrics.random_judge(votes_per_item, groups, semantics),
        "agreement": _agreement(counted, prefs, humans, judge_kinds),
    }


def _judge_report(name, kind, votes, prefs, question_index, counts, groups, semantics, options, *, total) -> dict:
    asr, acc, by_bloom = {g: metrics.rate(0, 0, (None, None)) for g in groups}, {}, {}
    for g in groups:
        if semantics[g] == "degrading":
            acc[g] = metrics.rate(0, 0, (None, None))
    lc_part: dict = {key: {} for key in LC_KEYS}
    if prefs is not None and len(prefs):
        indicators = metrics.asr_indicators(metrics.oriented_pairs(prefs))
        got_asr, got_acc, parts = metrics.asr_and_accuracy(
            indicators, question_index, counts, groups, semantics, by="bloom" if options.by_bloom else None
        )
        asr.update(got_asr)
        acc.update(got_acc)
        if parts:
            votes_by_bloom = dict(iter(votes.groupby("bloom", observed=True)))
            for bloom, (b_asr, b_acc) in parts.items():
                bvotes = votes_by_bloom.get(bloom, votes.iloc[0:0])
                by_bloom[bloom] = {"asr": b_asr, "accuracy": b_acc, "position": metrics.position(bvotes)}
        lc_part = _length_controlled(prefs, options)
    verbosity_votes = votes[votes["group"].isin(options.verbosity_groups).to_numpy()]
    return {
        "judge": name,
        "kind": kind,
        "n_votes": int(len(votes)),
        "n_votes_total": total,
        "asr": asr,
        "accuracy": acc,
        "position": metrics.position(votes),
        "verbosity": metrics.verbosity(
            verbosity_votes, measure=options.measure, bin_width=options.bin_width, seed=options.seed
        ),
        **lc_part,
        "label_and_position": labels.label_and_position(votes, options.scheme_labels),
        "option_probs": metrics.option_probs(votes),
        "by_bloom": by_bloom,
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
        prefs["group"].astype(str).to_numpy(),
        prefs["question_id"].to_numpy(),
        delta,
        y,
        n,
        orientation=_orientation(prefs),
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
        # One slope per judge, measured on the control items (per unit of tanh(Δlen / rms)).
        "length_slope": {g: result.length_slope for g in result.groups},
        "lc_n": result.n_questions,
        "lc_lambda": result.lam,
    }


def _orientation(prefs: pd.DataFrame) -> np.ndarray:
    """+1 where an item's A2 is (or was made from) its question's control A2, −1 where it is
    the control's A1, 0 where the question has no control item (see metrics.oriented_pairs)."""
    ctrl = prefs[(prefs["group"] == CONTROL).to_numpy()].drop_duplicates("question_id").set_index("question_id")
    c_a1 = ctrl["a1_root"].reindex(prefs["question_id"]).to_numpy()
    c_a2 = ctrl["a2_root"].reindex(prefs["question_id"]).to_numpy()
    a2 = prefs["a2_root"].to_numpy()
    return np.where(a2 == c_a2, 1.0, np.where(a2 == c_a1, -1.0, 0.0))


def _add_ranks(judges: list[dict], groups: list[str], semantics: dict[str, str]) -> None:
    for j in judges:
        j["ranks"] = {"asr": {}, "accuracy": {}}
    for g in groups:
        asr_ranks = stats.ranks({j["judge"]: j["asr"][g]["value"] for j in judges}, lower_is_better=True)
        for j in judges:
            j["ranks"]["asr"][g] = asr_ranks[j["judge"]]
        if semantics[g] == "degrading":
            acc_ranks = stats.ranks({j["judge"]: j["accuracy"][g]["value"] for j in judges}, lower_is_better=False)
            for j in judges:
                j["ranks"]["accuracy"][g] = acc_ranks[j["judge"]]


def _agreement(counted: pd.DataFrame, prefs: pd.DataFrame | None, humans: list[str], kinds: dict[str, str]) -> dict:
    out: dict = {"among_humans": None, "vs_human_majority": {}, "spearman": []}
    if prefs is None or not len(prefs):
        return out
    human_votes = counted[counted["judge"].isin(humans).to_numpy() & (counted["rater"] != "").to_numpy()]
    if len(human_votes):
        item_code, _ = pd.factorize(human_votes["item_id"])
        choice_code = human_votes["choice"].cat.codes.to_numpy()
        table = np.bincount(item_code * 3 + choice_code, minlength=3 * (item_code.max() + 1)).reshape(-1, 3)
        out["among_humans"] = {
            "krippendorff_alpha": stats.krippendorff_alpha_nominal(table),
            "fleiss_kappa": stats.fleiss_kappa(table),
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
            own = prefs[(prefs["judge"] == name).to_numpy()].set_index("item_id")["pref"]
            common = own.index.intersection(majority_pref.index)
            a, b = own.loc[common].to_numpy(), majority_pref.loc[common].to_numpy()
            out["vs_human_majority"][name] = {
                "cohen_kappa": stats.cohen_kappa(a, b),
                "agreement": float((a == b).mean()) if len(common) else None,
                "n": int(len(common)),
            }
    # Rank correlation of judges: Spearman of their mean item scores over the items both rated.
    item_code, _ = pd.factorize(prefs["item_id"])
    judge_code, names = pd.factorize(prefs["judge"].astype(str))
    mean_score = np.full((item_code.max() + 1, len(names)), np.nan)
    mean_score[item_code, judge_code] = (prefs["score"] / prefs["n"]).to_numpy()
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            both = ~np.isnan(mean_score[:, i]) & ~np.isnan(mean_score[:, j])
            rho = stats.spearman(mean_score[both, i], mean_score[both, j])
            out["spearman"].append({"a": a, "b": names[j], "rho": rho, "n": int(both.sum())})
    return out
