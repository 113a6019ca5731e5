"""The rows of the systems' ratings (analysis.ratings): per judge and for people, plain and
style-controlled, the style coefficients, and each judge's rank agreement with people.

Rows (docs/STATISTICS.md defines each): ``bt_rating`` and ``bt_rating_style`` (group: the
system; n: the judge's votes between two named systems, clusters: their prompts), ``style_coef``
(group: the feature), ``rank_spearman`` and ``rank_kendall`` (convention: "plain" or "style";
n: systems both rated), ``rank_reversal`` (group: "A > B", the judge's order where people's
is the other way round and both sides' intervals are apart). People: every human judge's votes
together, as the judge "humans", and their consensus, one vote per item by majority, as the
judge "human majority" (judges are compared with "humans").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import ratings
from analysis.frame import CHOICES, equals, is_in
from analysis.rows import NUMBER, RATING, Figure, Row, row, study_metric
from analysis.study_metrics import HUMANS, StudyData

# Bootstrap rounds of every rating fit: a fit per round per judge and per kind of fit, the
# study's first rounds of its shared resamples (``StudyData.counts``). 100, as Arena's
# leaderboard uses: a 100,000-vote study's ratings in a few seconds (bench/bench_ratings.py).
ROUNDS = 100
HUMAN_MAJORITY = "human majority"


def _fits(data: StudyData) -> dict[tuple[str, bool], tuple[str, ratings.Ratings]]:
    """(judge, style) → (kind, fit) for every judge with votes between two named systems, and
    people together as ``HUMANS``."""
    counted = data.counted
    if "a1_system" not in counted.columns or not len(counted):
        return {}
    named = (counted["a1_system"].to_numpy(dtype=object) != "") & (counted["a2_system"].to_numpy(dtype=object) != "")
    if not named.any():
        return {}
    votes = counted[named]
    options = data.options
    scaling = ratings.Scaling.from_dict(options.style_scaling) if options.style_scaling else None
    shared = options.ratings_bootstrap == "prompt"
    counts = data.counts[:ROUNDS] if shared else None
    whose = [(name, data.kinds[name], equals(votes["judge"], name)) for name in sorted(data.kinds)]
    sets = [(name, kind, votes[mask]) for name, kind, mask in whose if mask.any()]
    if data.humans:
        people = votes[is_in(votes["judge"], list(data.humans))]
        sets += [(HUMANS, "human", people), (HUMAN_MAJORITY, "human", majority_votes(people))]
    out = {}
    for name, kind, judged in sets:
        if not len(judged):
            continue
        for style in (False, True):
            fit = ratings.rate(
                judged,
                style=style,
                anchor=options.ratings_anchor or None,
                systems=_study_systems(votes),
                scaling=scaling,
                bootstrap=options.ratings_bootstrap,
                rounds=ROUNDS,
                seed=options.seed,
                counts=counts,
                cluster_index=data.cluster_index if shared else None,
            )
            if fit is not None:
                out[(name, style)] = (kind, fit)
    return out


def majority_votes(people: pd.DataFrame) -> pd.DataFrame:
    """People's consensus as one vote per item: the item's first vote with its choice replaced
    by the majority of people's votes on it (a1 or a2 by more votes, else a tie; SPEC's item
    preference)."""
    if not len(people):
        return people
    choice = people["choice"].to_numpy(dtype=object)
    score = pd.Series(np.select([choice == "a1", choice == "a2"], [1, -1], 0), index=people.index)
    net = score.groupby(people["item_id"].to_numpy()).sum()
    first = people.drop_duplicates("item_id").copy()
    majority = net.reindex(first["item_id"].to_numpy()).to_numpy()
    first["choice"] = pd.Categorical(np.select([majority > 0, majority < 0], ["a1", "a2"], "tie"), categories=CHOICES)
    return first


def _study_systems(votes: pd.DataFrame) -> list[str]:
    """The study's systems in order of first appearance (the first is the default anchor)."""
    both = np.stack([votes["a1_system"].to_numpy(dtype=object), votes["a2_system"].to_numpy(dtype=object)], axis=1)
    return [str(s) for s in pd.unique(both.ravel()) if s != ""]


def _only_present(fit: ratings.Ratings) -> list[str]:
    return [s for s in fit.systems if fit.votes_per_system.get(s)]


@study_metric(
    "ratings",
    Figure(
        "bt_rating",
        "Rating",
        "systems",
        RATING,
        "The system's Bradley-Terry rating on Chatbot Arena's Elo-like scale (anchor system at 1000), from this"
        " judge's votes between systems; intervals by bootstrap over prompts (or votes, Arena's convention).",
        "the judge's votes involving the system",
    ),
    Figure(
        "bt_rating_style",
        "Rating, style-controlled",
        "systems",
        RATING,
        "The same rating with the pair's differences in length, headers, lists and bold as covariates, as Arena's"
        " style control fits them (the study's frozen style scaling): which system is better once style is set aside.",
        "the judge's votes involving the system",
    ),
    Figure(
        "style_coef",
        "Style coefficient",
        "systems",
        NUMBER,
        "How much the judge rewards one standardised unit of a style feature (group: tokens, headers, lists, bold)"
        " in log-odds of preferring the answer, from the style-controlled fit.",
        "votes",
    ),
    Figure(
        "rank_spearman",
        "Spearman with people",
        "systems",
        NUMBER,
        "Spearman's rank correlation of the judge's system ratings with people's (convention: plain or style).",
        "systems both rated",
    ),
    Figure(
        "rank_kendall",
        "Kendall with people",
        "systems",
        NUMBER,
        "Kendall's tau of the judge's system ratings with people's (convention: plain or style).",
        "systems both rated",
    ),
    Figure(
        "rank_reversal",
        "Order reversed against people",
        "systems",
        RATING,
        "A pair of systems (group A > B) the judge orders opposite to people with both intervals apart; estimate:"
        " the judge's rating difference.",
        "systems both rated",
    ),
)
def rating_rows(data: StudyData) -> list[Row]:
    """Every fit's rows (see the module's doc)."""
    fits = _fits(data)
    out: list[Row] = []
    for (name, style), (kind, fit) in fits.items():
        metric = "bt_rating_style" if style else "bt_rating"
        convention = f"{fit.bootstrap} bootstrap, anchor {fit.anchor}"
        note = "; ".join(n for n in (fit.note, fit.scaling.describe() if fit.scaling else "") if n)
        for system in _only_present(fit):
            out.append(
                row(
                    name,
                    kind,
                    metric,
                    fit.ratings[system],
                    ci=fit.ci[system],
                    n=fit.votes_per_system[system],
                    clusters=fit.clusters,
                    group=system,
                    convention=convention,
                    note=note,
                )
            )
        for feature, value in fit.coef.items():
            out.append(
                row(
                    name,
                    kind,
                    "style_coef",
                    value,
                    ci=fit.coef_ci[feature],
                    n=fit.n,
                    clusters=fit.clusters,
                    group=feature,
                    convention=convention,
                    note=note,
                )
            )
    out.extend(_agreement_rows(data, fits))
    return out


def _agreement_rows(data: StudyData, fits: dict) -> list[Row]:
    out: list[Row] = []
    for style in (False, True):
        people = fits.get((HUMANS, style))
        if people is None:
            continue
        label = "style" if style else "plain"
        for (name, fit_style), (kind, fit) in fits.items():
            if fit_style != style or name in (HUMANS, HUMAN_MAJORITY) or name in data.humans:
                continue
            found = ratings.agreement(fit, people[1])
            if found is None:
                continue
            out.append(
                row(name, kind, "rank_spearman", found.spearman, ci=found.spearman_ci, n=found.n, convention=label)
            )
            out.append(row(name, kind, "rank_kendall", found.kendall, ci=found.kendall_ci, n=found.n, convention=label))
            for higher, people_higher in found.reversed_pairs:
                out.append(
                    row(
                        name,
                        kind,
                        "rank_reversal",
                        fit.ratings[higher] - fit.ratings[people_higher],
                        group=f"{higher} > {people_higher}",
                        convention=label,
                        note=f"people rate {people_higher} above {higher}; both sides' intervals apart",
                    )
                )
    return out
