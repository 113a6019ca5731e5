"""How many human votes is a judge worth? Prediction-powered inference of people's rates.

Where a judge voted on every item and people on a subset, a human rate (ASR per perturbation
group, the position difference) is estimated from both, with a valid interval: Angelopoulos,
Bates, Fannjiang, Jordan and Zrnic, "Prediction-powered inference", Science 2023, with the
power tuning of Angelopoulos, Duchi and Zrnic, "PPI++", arXiv 2311.01453.

Written here, not taken from ppi-python: that package brings numba, llvmlite, statsmodels and a
Google-Drive downloader (13 packages, about 75 MB of wheels) for a formula of a few lines, and
it knows neither clusters nor ratios, which the report needs. Its mean estimator is the special
case of ``ppi_ratio`` with every denominator 1 and one unit per cluster
(tests/test_analysis_ppi.py checks the equality with its formula by hand).

The rate is a ratio theta = E[num] / E[den] over units (questions for ASR: hit / base set;
items for the position difference: the sum of +1/0/-1 vote scores / votes), the solution of
E[g(theta)] = 0 with g = num - theta den. People give (num, den) on the labelled units L (n of
them), the judge on every unit; U (N units) are those without people's. With lambda in [0, 1],

    theta = [m_L(y_num) - lambda (m_L(f_num) - m_U(f_num))]
            / [m_L(y_den) - lambda (m_L(f_den) - m_U(f_den))],

m_ the mean over a sample. lambda 0 is people alone; lambda 1 is PPI as first published. The
judge only helps: whatever it votes, the correction m_L(f) - m_U(f) has mean 0 when the labelled
units are a random subset of the units (the one assumption: which items people voted on does
not depend on how they would vote).

Clusters. Units of one cluster (a question's items; a prompt's questions) are not independent,
and a cluster may hold labelled and unlabelled units. The variance is the sandwich of the
linearised estimating equation summed per cluster:
psi_c = (1/n) sum_{L_c} (r_i - mean_L r) + (lambda/N) sum_{U_c} (g_f,i - mean_U g_f), with
r = g_Y - lambda g_f, and V = sum_c psi_c^2 / H^2, H the denominator above. With one unit per
cluster it is ppi-python's var(r)/n + lambda^2 var(f)/N (variances with 1/n). The votes of one
rater on several questions are not clustered here (the human position row clusters by rater
too): a rater's own habit enters only through the labelled part, and the demo's and our imported
data sets spread each rater over many clusters; docs/STATISTICS.md says so.

Power tuning: lambda minimises the estimated variance, sum_c (a_c + lambda b_c)^2 with a_c the
people's part and b_c the judge's, at people's own estimate: lambda = -sum a b / sum b^2,
clipped to [0, 1] (as ppi-python clips). A useless judge gets lambda near 0 and costs nothing.

The effective number of human votes: the votes people cast on the labelled units, times the
ratio of people-alone's variance to PPI's (both from the same sandwich formula): how many
votes people alone would need for an interval as narrow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis import metrics, stats
from analysis.frame import CONTROL, is_in
from analysis.rows import NUMBER, PERCENT, POINTS, Figure, Row, row, study_metric
from analysis.study_metrics import StudyData

CONVENTION = "prediction-powered inference (PPI++, lambda tuned), clustered by question"


@dataclass
class PPIResult:
    """``value`` and ``ci`` the prediction-powered estimate; ``classical`` and
    ``classical_ci`` people alone on the labelled units (the same sandwich variance);
    ``lam`` the power-tuning weight; ``n`` labelled units, ``n_unlabelled`` the judge's
    others, ``clusters`` clusters; ``variance_ratio`` people-alone's variance / PPI's (how many
    times the human votes the judge makes them worth)."""

    value: float | None
    ci: tuple[float | None, float | None]
    classical: float | None
    classical_ci: tuple[float | None, float | None]
    lam: float | None
    n: int
    n_unlabelled: int
    clusters: int
    variance_ratio: float | None
    base: float = 0.0  # people's denominator summed: their rate's n (questions in the base set, votes)
    reason: str = ""


def _means(x: np.ndarray, mask: np.ndarray) -> float:
    return float(x[mask].mean()) if mask.any() else 0.0


def ppi_ratio(
    *,
    y_num: np.ndarray,
    y_den: np.ndarray,
    f_num: np.ndarray,
    f_den: np.ndarray,
    labelled: np.ndarray,
    cluster: np.ndarray,
    lam: float | None = None,
    bounds: tuple[float, float] = (0.0, 1.0),
    level: float = 0.95,
) -> PPIResult:
    """The prediction-powered ratio sum-of-num / sum-of-den over units (see the module's doc).

    Per unit: ``y_num``, ``y_den`` people's (read on ``labelled`` units only), ``f_num``,
    ``f_den`` the judge's, ``cluster`` its cluster. ``lam`` None tunes it; a number fixes it
    (1: PPI, 0: people alone). The interval is normal, cut to ``bounds``."""
    arrays = [np.asarray(a, dtype=np.float64) for a in (y_num, y_den, f_num, f_den)]
    labelled = np.asarray(labelled, dtype=bool)
    cluster = np.asarray(cluster)
    if len({len(a) for a in (*arrays, labelled, cluster)}) != 1:
        raise ValueError(
            "y_num, y_den, f_num, f_den, labelled and cluster must have one value per unit; lengths "
            + ", ".join(str(len(a)) for a in (*arrays, labelled, cluster))
        )
    if lam is not None and not 0 <= lam <= 1:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    y_num, y_den, f_num, f_den = arrays
    y_num, y_den = np.where(labelled, y_num, 0.0), np.where(labelled, y_den, 0.0)
    unlabelled = ~labelled
    n, n_u = int(labelled.sum()), int(unlabelled.sum())
    code = stats.cluster_codes(cluster) if len(cluster) else np.zeros(0, np.int64)
    k = int(code.max()) + 1 if len(code) else 0
    empty = PPIResult(None, (None, None), None, (None, None), None, n, n_u, k, None)
    if n < 2 or len(np.unique(code[labelled])) < 2:
        empty.reason = f"{n} unit(s) with people's votes in {len(np.unique(code[labelled]))} cluster(s): 2 needed"
        return empty

    # CR1's small-sample factor G / (G - 1) on each sample's part of the variance, G the clusters
    # with units of that sample (with one unit per cluster, a sample variance's n / (n - 1)).
    g_l, g_u = len(np.unique(code[labelled])), len(np.unique(code[unlabelled]))
    on_l = math.sqrt(g_l / (g_l - 1))
    on_u = math.sqrt(g_u / (g_u - 1)) if g_u > 1 else 1.0

    def parts(theta: float) -> tuple[np.ndarray, np.ndarray]:
        """Per cluster: people's part a_c and the judge's b_c of psi_c = a_c + lambda b_c."""
        g_y, g_f = y_num - theta * y_den, f_num - theta * f_den
        a = np.bincount(code, weights=np.where(labelled, g_y - _means(g_y, labelled), 0.0), minlength=k) / n * on_l
        b = -np.bincount(code, weights=np.where(labelled, g_f - _means(g_f, labelled), 0.0), minlength=k) / n * on_l
        if n_u:
            centred = np.where(unlabelled, g_f - _means(g_f, unlabelled), 0.0)
            b += np.bincount(code, weights=centred, minlength=k) / n_u * on_u
        return a, b

    def estimate(weight: float) -> tuple[float | None, float]:
        shift_num = _means(f_num, labelled) - _means(f_num, unlabelled) if n_u else 0.0
        shift_den = _means(f_den, labelled) - _means(f_den, unlabelled) if n_u else 0.0
        den = _means(y_den, labelled) - weight * shift_den
        if den <= 0:
            return None, den
        return (_means(y_num, labelled) - weight * shift_num) / den, den

    classical, h0 = estimate(0.0)
    if classical is None:
        empty.reason = "people's votes give the rate no base"
        return empty
    a0, b0 = parts(classical)
    var_classical = float((a0 * a0).sum()) / (h0 * h0)
    tuned = lam is None
    if tuned:
        bb = float((b0 * b0).sum())
        lam = 0.0 if not n_u or bb <= 0 else float(np.clip(-float((a0 * b0).sum()) / bb, 0.0, 1.0)) + 0.0
    if not n_u:
        lam = 0.0
    value, h = estimate(lam)
    if value is None:
        empty.reason = "the judge's correction leaves the rate no base"
        return empty
    a, b = parts(value)
    psi = a + lam * b
    var = float((psi * psi).sum()) / (h * h)
    if tuned and var > var_classical:
        # lambda was tuned at people's estimate; where the variance at PPI's own estimate comes
        # out above people alone's, the judge does not help: people alone (lambda 0).
        lam, value, var = 0.0, classical, var_classical
    z = stats.Z95 if level == 0.95 else float(sps.norm.ppf((1 + level) / 2))
    # Clusters where people's rate has a base: the fallback interval's size.
    base_clusters = len(np.unique(code[labelled & (y_den > 0)]))

    def interval(centre: float, v: float) -> tuple[float, float]:
        if bounds != (0.0, 1.0):
            half = z * math.sqrt(max(v, 0.0))
            return (max(bounds[0], centre - half), min(bounds[1], centre + half))
        # A share: Wilson's interval on the effective number p(1 - p) / V, as the report's other
        # shares (stats.clustered_rates); the normal one undercovers at a few dozen questions
        # (92% at 50, tests/test_analysis_ppi.py). At 0 or 1, or without variance, never a point:
        # Wilson's on the clusters, as the report's fallback (docs/STATISTICS.md).
        n_eff = centre * (1 - centre) / v if 0 < centre < 1 and v > 0 else base_clusters
        lo, hi = stats.wilson(min(max(centre, 0.0), 1.0) * n_eff, n_eff, z=z)
        return (float(lo), float(hi))

    return PPIResult(
        value=float(value),
        ci=interval(value, var),
        classical=float(classical),
        classical_ci=interval(classical, var_classical),
        lam=float(lam),
        n=n,
        n_unlabelled=n_u,
        clusters=k,
        variance_ratio=var_classical / var if var > 0 else None,
        base=float(y_den.sum()),
    )


# --------------------------------------------------------------------------- the report's rows


def _judge_asr_units(prefs: pd.DataFrame) -> pd.DataFrame:
    """One row per (question, group) where the judge has both preferences ASR needs: its
    ``asr_hit`` and ``asr_base`` with the question's ``cluster_id``."""
    pairs = metrics.oriented_pairs(prefs)
    ind = metrics.asr_indicators(pairs)
    ind = ind[~np.isnan(pairs["ctrl"].to_numpy())]
    return ind[["question_id", "cluster_id", "group", "asr_hit", "asr_base"]]


def ppi_asr(judge_prefs: pd.DataFrame, human_prefs: pd.DataFrame | None, group: str) -> tuple[PPIResult, int]:
    """The people's ASR of ``group`` by PPI with this judge: units are the questions where the
    judge has a control and a perturbed-item preference; labelled those where people have both
    too (their ASR row's base). Returns the result and the human votes on the labelled units'
    two items."""
    judge = _judge_asr_units(judge_prefs)
    judge = judge[judge["group"].to_numpy() == group]
    if human_prefs is not None and len(human_prefs):
        people = _judge_asr_units(human_prefs)
        people = people[people["group"].to_numpy() == group].drop_duplicates("question_id").set_index("question_id")
    else:
        people = pd.DataFrame(columns=["asr_hit", "asr_base"], dtype=float)
    at = people.index.get_indexer(judge["question_id"])
    labelled = at >= 0
    y_hit = np.where(labelled, people["asr_hit"].to_numpy(dtype=float)[np.maximum(at, 0)] if len(people) else 0, 0)
    y_base = np.where(labelled, people["asr_base"].to_numpy(dtype=float)[np.maximum(at, 0)] if len(people) else 0, 0)
    found = ppi_ratio(
        y_num=y_hit,
        y_den=y_base,
        f_num=judge["asr_hit"].to_numpy(dtype=float),
        f_den=judge["asr_base"].to_numpy(dtype=float),
        labelled=labelled,
        cluster=judge["cluster_id"].to_numpy(),
    )
    votes = 0
    if human_prefs is not None and len(human_prefs) and labelled.any():
        questions = judge["question_id"].to_numpy()[labelled]
        on = human_prefs[human_prefs["question_id"].isin(questions).to_numpy()]
        on = on[(on["group"].astype(str).to_numpy() == group) | (on["group"].astype(str).to_numpy() == CONTROL)]
        votes = int(on["n"].sum())
    return found, votes


def _position_units(votes: pd.DataFrame) -> pd.DataFrame:
    """Per item: the sum of +1 (first) / -1 (second) / 0 (tie) over the votes whose order is
    known, their number, and the item's cluster."""
    shown = votes["choice_shown"].astype(object).to_numpy()
    keep = votes["order_known"].to_numpy(dtype=bool) & np.isin(shown, ["first", "second", "tie"])
    d = np.where(shown == "first", 1.0, np.where(shown == "second", -1.0, 0.0))[keep]
    frame = pd.DataFrame(
        {"item_id": votes["item_id"].to_numpy()[keep], "cluster_id": votes["cluster_id"].to_numpy()[keep], "d": d}
    )
    return frame.groupby("item_id", sort=False).agg(cluster_id=("cluster_id", "first"), d=("d", "sum"), n=("d", "size"))


def ppi_position(judge_votes: pd.DataFrame, human_votes: pd.DataFrame) -> tuple[PPIResult, int]:
    """People's position difference (first - second over their votes) by PPI with this judge:
    units are the items the judge voted on; labelled those people voted on. Returns the result
    (on the share scale (1 + diff) / 2 inside, reported as the difference) and the human votes
    on labelled items."""
    judge = _position_units(judge_votes)
    people = _position_units(human_votes)
    at = people.index.get_indexer(judge.index)
    labelled = at >= 0
    pick = np.maximum(at, 0)
    y_d = np.where(labelled, people["d"].to_numpy()[pick] if len(people) else 0.0, 0.0)
    y_n = np.where(labelled, people["n"].to_numpy(dtype=float)[pick] if len(people) else 0.0, 0.0)
    f_n = judge["n"].to_numpy(dtype=float)
    # (1 + d) / 2 per vote: a share in [0, 1] like the position row's interval works on.
    found = ppi_ratio(
        y_num=(y_n + y_d) / 2,
        y_den=y_n,
        f_num=(f_n + judge["d"].to_numpy()) / 2,
        f_den=f_n,
        labelled=labelled,
        cluster=judge["cluster_id"].to_numpy(),
    )

    def as_diff(v: float | None) -> float | None:
        return None if v is None else 2 * v - 1

    found.value, found.classical = as_diff(found.value), as_diff(found.classical)
    found.ci = tuple(as_diff(v) for v in found.ci)
    found.classical_ci = tuple(as_diff(v) for v in found.classical_ci)
    return found, int(y_n.sum())


def _rows(name: str, kind: str, metric: str, found: PPIResult, votes: int, group: str, unit: str) -> list[Row]:
    def fmt(v: float | None, ci: tuple) -> str:
        if v is None:
            return "n/a"
        return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

    if found.value is None:
        note = f"no estimate: {found.reason}"
    else:
        note = (
            f"{found.n} {unit} with people's votes, {found.n_unlabelled} with the judge's only; "
            f"people alone {fmt(found.classical, found.classical_ci)}; lambda {found.lam:.2f}"
        )
    where = {"convention": CONVENTION, "note": note, "clusters": found.clusters}
    effective = None if found.variance_ratio is None else votes * found.variance_ratio
    return [
        row(name, kind, metric, found.value, ci=found.ci, n=round(found.base), group=group, **where),
        row(name, kind, "ppi_effective_votes", effective, n=votes, group=group, **where),
    ]


@study_metric(
    "ppi",
    Figure(
        "ppi_asr",
        "People's ASR, PPI",
        "judges_against_people",
        PERCENT,
        "People's attack success rate estimated from their votes and this judge's votes on every item by"
        " prediction-powered inference, with a valid interval.",
        "questions in people's base set",
    ),
    Figure(
        "ppi_position",
        "People's Diff, PPI",
        "judges_against_people",
        POINTS,
        "People's first-minus-second position difference estimated from their votes and this judge's by"
        " prediction-powered inference.",
        "people's votes of known display order",
    ),
    Figure(
        "ppi_effective_votes",
        "Human-equivalent votes",
        "judges_against_people",
        NUMBER,
        "The human votes people alone would need for as narrow an interval as prediction-powered"
        " inference gives with this judge (n: the human votes used).",
        "human votes used",
    ),
)
def ppi_rows(data: StudyData) -> list[Row]:
    """People's rates estimated with each other judge's votes by prediction-powered inference
    (this module): ``ppi_asr`` per perturbation group (n: questions in people's base set, as
    their ``asr`` row) and ``ppi_position`` (people's first - second; n: their votes), each with
    ``ppi_effective_votes`` (group: the perturbation group, or "position"; estimate: the human
    votes people alone would need for as narrow an interval; n: the human votes used)."""
    counted = data.counted
    if not data.humans:
        return []
    human_votes = counted[is_in(counted["judge"], data.humans)]
    if not len(human_votes):
        return []
    human_prefs = (
        pd.concat([data.prefs_by_judge[h] for h in data.humans if h in data.prefs_by_judge])
        if any(h in data.prefs_by_judge for h in data.humans)
        else None
    )
    if human_prefs is not None and len(data.humans) > 1:
        # Several human pools are one "people": their votes on an item as one preference.
        human_prefs = metrics.item_preferences(human_votes.assign(judge="people"))
    out: list[Row] = []
    for name in sorted(data.kinds):
        if name in data.humans:
            continue
        kind = data.kinds[name]
        judge_prefs = data.prefs_by_judge.get(name)
        if judge_prefs is not None and len(judge_prefs):
            for group in data.groups:
                found, votes = ppi_asr(judge_prefs, human_prefs, group)
                out += _rows(name, kind, "ppi_asr", found, votes, group, "questions")
        judge_votes = counted[is_in(counted["judge"], [name])]
        if len(judge_votes):
            found, votes = ppi_position(judge_votes, human_votes)
            out += _rows(name, kind, "ppi_position", found, votes, "position", "items")
    return out
