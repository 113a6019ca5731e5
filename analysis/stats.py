"""Small statistics: intervals, tests and agreement coefficients. Pure numpy/scipy (pandas
only to code clusters).

Votes on one question are not independent (the same answers, often the same judge several
times), so every interval and test here takes its sums per cluster: per question, and for
votes with a rater also per rater (two-way, Cameron, Gelbach & Miller 2011). docs/STATISTICS.md
says which method each figure uses and why.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

Z95 = 1.959963984540054


def wilson(successes: float, n: float, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval for a share; (None, None) when n is 0 (undefined, not zero)."""
    if n <= 0:
        return (None, None)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return (lo, hi)


def bootstrap_counts(n: int, *, reps: int, seed: int) -> np.ndarray:
    """reps × n matrix: how often each of n units is drawn in each resample with replacement."""
    if n == 0:
        return np.zeros((reps, 0), dtype=np.float32)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(reps, n))
    out = np.empty((reps, n), dtype=np.float32)
    for r in range(reps):  # row by row: a tenth of the memory traffic of one flat bincount
        out[r] = np.bincount(draws[r], minlength=n)
    return out


def bootstrap_ratio_ci(
    counts: np.ndarray, hits: np.ndarray, bases: np.ndarray, level: float = 0.95
) -> list[tuple[float | None, float | None]]:
    """Percentile intervals of ratios sum(hit)/sum(base) over resampled units (clusters).

    ``hits`` and ``bases`` are units × metrics (per-unit sums); one BLAS call per matrix.
    Resamples whose base set is empty are left out (the ratio is undefined there). When every
    resample gives the same ratio (a judge at 0% or 100%), the percentile interval would be a
    point: the Wilson interval on the number of units in the base set is used instead.
    """
    if counts.shape[1] == 0 or hits.shape[1] == 0:
        return [(None, None)] * hits.shape[1]
    num = counts @ hits.astype(np.float32)
    den = counts @ bases.astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(den > 0, num / den, np.nan)
    lo_q, hi_q = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    out: list[tuple[float | None, float | None]] = []
    for j in range(ratio.shape[1]):
        col = ratio[:, j]
        col = col[~np.isnan(col)]
        if bases[:, j].sum() == 0 or col.size == 0:
            out.append((None, None))
            continue
        lo, hi = np.percentile(col, [lo_q, hi_q])
        if hi - lo < 1e-12:
            units = float((bases[:, j] > 0).sum())
            lo, hi = wilson(units * hits[:, j].sum() / bases[:, j].sum(), units, z=_z(level))
        out.append((float(lo), float(hi)))
    return out


def _z(level: float) -> float:
    return Z95 if level == 0.95 else float(sps.norm.ppf((1 + level) / 2))


def cluster_codes(*keys: np.ndarray) -> np.ndarray:
    """Dense codes 0..G-1 for the clusters named by one or more key columns (per vote)."""
    code = pd.factorize(np.asarray(keys[0]))[0].astype(np.int64)
    for key in keys[1:]:
        other = pd.factorize(np.asarray(key))[0].astype(np.int64)
        code = pd.factorize(code * (int(other.max(initial=0)) + 1) + other)[0].astype(np.int64)
    return code


def first_of_codes(codes: np.ndarray) -> np.ndarray:
    """Where each code first occurs, for codes numbered in order of first appearance (as
    ``cluster_codes`` gives them): ``np.unique(codes, return_index=True)[1]`` without a sort."""
    codes = np.asarray(codes, dtype=np.int64)
    seen_before = np.maximum.accumulate(codes)
    is_first = np.empty(len(codes), dtype=bool)
    is_first[:1] = True
    is_first[1:] = codes[1:] > seen_before[:-1]
    return np.flatnonzero(is_first)


class Clusters:
    """The clusters of a set of votes, coded once for every interval and test over them: by
    question, and where ``rater`` codes are given (−1 = no rater: each such vote is its own
    cluster) also by rater and by (question, rater) for the two-way variance."""

    def __init__(self, question: np.ndarray, rater: np.ndarray | None = None) -> None:
        self.n = len(question)
        self.question = cluster_codes(question) if self.n else np.zeros(0, np.int64)
        self.rater = self.both = None
        if rater is not None and self.n:
            rater = np.asarray(rater, dtype=np.int64)
            own = np.where(rater < 0, rater.max(initial=0) + 1 + np.arange(self.n), rater)
            self.rater = cluster_codes(own)
            # cluster_codes(self.question, self.rater) in one pass: codes numbered in order of
            # first appearance are their own codes, so only the pairs need numbering.
            self.both = cluster_codes(self.question * (int(self.rater.max()) + 1) + self.rater)

    def subset(self, mask: np.ndarray) -> Clusters:
        out = Clusters.__new__(Clusters)
        out.n = int(mask.sum())
        out.question = self.question[mask]
        out.rater = None if self.rater is None else self.rater[mask]
        out.both = None if self.both is None else self.both[mask]
        return out


def cluster_sums(
    codes: np.ndarray, values: np.ndarray, group: np.ndarray | None = None, n_groups: int = 1
) -> np.ndarray:
    """clusters × metrics sums of per-vote ``values``: votes × metrics, or with ``group`` (the
    metric each vote belongs to, 0..n_groups-1) one value per vote, summed in one pass."""
    g = int(codes.max()) + 1 if len(codes) else 0
    if group is not None:
        return np.bincount(codes * n_groups + group, weights=values, minlength=g * n_groups).reshape(g, n_groups)
    # One count over (cluster, metric) cells: each cell sums its votes in the same order as a
    # count per metric would, at one call's cost instead of one per metric.
    m = values.shape[1]
    cells = (np.asarray(codes, dtype=np.int64)[:, None] * m + np.arange(m)).ravel()
    return np.bincount(cells, weights=np.asarray(values, dtype=float).ravel(), minlength=g * m).reshape(g, m)


def _cr_variance(sums: np.ndarray, bases: np.ndarray, ratio: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Cluster-robust (CR1) variance of each ratio sum(x)/sum(b) from per-cluster sums."""
    resid = sums - ratio * bases
    g = (bases > 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(g > 1, g / np.maximum(g - 1, 1) * (resid * resid).sum(axis=0) / (total * total), 0.0)


def _group_variance(
    codes: np.ndarray, x: np.ndarray, group: np.ndarray, n_groups: int, ratio: np.ndarray, per_group: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CR1 variance (metrics × groups) of group means when every vote is in one group, from the
    sums of the (cluster, group) cells that have votes only; and the clusters in each group."""
    cell, keys = pd.factorize(codes * n_groups + group)
    cell_group = keys % n_groups
    size = np.bincount(cell, minlength=len(keys)).astype(float)
    k = np.bincount(cell_group, minlength=n_groups)
    var = np.zeros((x.shape[1], n_groups))
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(x.shape[1]):
            resid = np.bincount(cell, weights=x[:, j], minlength=len(keys)) - ratio[j, cell_group] * size
            ss = np.bincount(cell_group, weights=resid * resid, minlength=n_groups)
            var[j] = np.where(k > 1, k / np.maximum(k - 1, 1) * ss / (per_group * per_group), 0.0)
    return var, k


def _vote_variance(
    x: np.ndarray, group: np.ndarray, n_groups: int, ratio: np.ndarray, per_group: np.ndarray
) -> np.ndarray:
    """The variance (metrics × groups) of each group mean as if every vote were its own
    cluster: Σ (x − p)² / n² over the group's votes."""
    var = np.zeros((x.shape[1], n_groups))
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(x.shape[1]):
            resid = x[:, j] - np.nan_to_num(ratio[j])[group]
            ss = np.bincount(group, weights=resid * resid, minlength=n_groups)
            var[j] = np.where(per_group > 0, ss / (per_group * per_group), 0.0)
    return var


def clustered_rates(
    values: np.ndarray,
    bases: np.ndarray | None,
    clusters: Clusters,
    level: float = 0.95,
    *,
    group: np.ndarray | None = None,
    n_groups: int = 1,
) -> list[dict]:
    """Rates sum(values)/sum(bases) (per-vote ``values`` in [0, 1], ``bases`` 0/1, both votes ×
    metrics) with intervals that respect the clustering of votes. With ``group`` instead of
    ``bases``, the rate of each group 0..n_groups-1 is the mean over its votes (verbosity bins,
    Bloom levels: each vote is in one group); ``values`` is one value per vote, or votes ×
    metrics, and the results come metric by metric, each with its n_groups groups.

    The variance is cluster-robust by question (the clusters of ``clusters``: a prompt shared
    by several questions is one); where the clusters have raters it is two-way (question,
    rater): V_q + V_r − V_qr, never below either one-way variance. Nor is it ever below the
    variance of the same votes as if each were its own cluster, Σ b²(x − p)² / (Σ b)²: the
    variance of the scored votes, which knows what ties take away (a vote scored ½ varies less
    than one scored 0 or 1; for votes scored 0 or 1 it is p(1 − p) / n). The interval is
    Wilson's on the effective number of votes n_eff = p(1 − p) / V (Kish's design effect); with
    ties it may exceed the votes counted. When the rate is 0 or 1, or the variance is 0, n_eff
    is the number of clusters: the interval then still has width, as a score interval on them.
    Returns per metric {value, ci, n (votes in the base), clusters, n_eff}.
    """
    values = np.asarray(values, dtype=float)
    if group is None:
        bases = np.asarray(bases, dtype=float)
        x = values * bases

        def sums(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return cluster_sums(codes, x, None), cluster_sums(codes, bases, None)

        sums_q, bases_q = sums(clusters.question)
        total_b, total_x = bases_q.sum(axis=0), sums_q.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(total_b > 0, total_x / total_b, np.nan)
        var = _cr_variance(sums_q, bases_q, ratio, total_b)
        if clusters.rater is not None:
            var_r = _cr_variance(*sums(clusters.rater), ratio, total_b)
            var_qr = _cr_variance(*sums(clusters.both), ratio, total_b)
            var = np.maximum(var + var_r - var_qr, np.maximum(var, var_r))
        with np.errstate(invalid="ignore", divide="ignore"):
            resid = bases * (values - np.nan_to_num(ratio))
            var = np.maximum(var, np.where(total_b > 0, (resid * resid).sum(axis=0) / (total_b * total_b), 0.0))
        n_clusters = (bases_q > 0).sum(axis=0)
    else:
        x = values if values.ndim == 2 else values[:, None]
        group = np.asarray(group, dtype=np.int64)
        per_group = np.bincount(group, minlength=n_groups).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.stack([np.bincount(group, weights=x[:, j], minlength=n_groups) for j in range(x.shape[1])])
            ratio = np.where(per_group > 0, ratio / per_group, np.nan)
        var, k = _group_variance(clusters.question, x, group, n_groups, ratio, per_group)
        if clusters.rater is not None:
            var_r, _ = _group_variance(clusters.rater, x, group, n_groups, ratio, per_group)
            var_qr, _ = _group_variance(clusters.both, x, group, n_groups, ratio, per_group)
            var = np.maximum(var + var_r - var_qr, np.maximum(var, var_r))
        var = np.maximum(var, _vote_variance(x, group, n_groups, ratio, per_group))
        # Metric by metric, each with its groups: the order of the results.
        ratio, var = ratio.ravel(), var.ravel()
        total_b, n_clusters = np.tile(per_group, x.shape[1]), np.tile(k, x.shape[1])
    z = _z(level)
    out = []
    for j in range(len(total_b)):
        n = float(total_b[j])
        if n == 0:
            out.append({"value": None, "ci": [None, None], "n": 0, "clusters": 0, "n_eff": None})
            continue
        clusters_j = int(n_clusters[j])
        p = float(ratio[j])
        n_eff = p * (1 - p) / float(var[j]) if 0 < p < 1 and var[j] > 0 else float(clusters_j)
        out.append(
            {"value": p, "ci": list(wilson(p * n_eff, n_eff, z=z)), "n": int(n), "clusters": clusters_j, "n_eff": n_eff}
        )
    return out


def clustered_sign_test(
    diff: np.ndarray, clusters: Clusters, *, group: np.ndarray | None = None, n_groups: int = 1
) -> float | None | list[float | None]:
    """Two-sided p-value of "the mean of ``diff`` is 0" with votes clustered by question (and
    rater): z = sum(d) / sqrt(V0) with the variance taken under the null, V0 = the sum over
    clusters of their squared sums (two-way: V_q + V_r − V_qr, never below either one-way).
    This is the normal approximation of the test that flips the sign of whole clusters; with
    one vote per question and no ties it is the normal approximation of the binomial test.
    None when no vote has a nonzero ``diff``. With ``group``, one p-value per group (a list)."""
    diff = np.asarray(diff, dtype=float)
    one = group is None
    if one:
        group = np.zeros(len(diff), dtype=np.int64)

    def null_variance(codes: np.ndarray) -> np.ndarray:
        sums = cluster_sums(codes, diff, group, n_groups)
        return (sums * sums).sum(axis=0)

    v = null_variance(clusters.question)
    if clusters.rater is not None:
        v_r = null_variance(clusters.rater)
        v = np.maximum.reduce([v + v_r - null_variance(clusters.both), v, v_r])
    total = np.bincount(group, weights=diff, minlength=n_groups)
    nonzero = np.bincount(group, weights=diff != 0, minlength=n_groups) > 0
    out: list[float | None] = []
    for g in range(n_groups):
        if not nonzero[g]:
            out.append(None)
        elif v[g] <= 0:  # every cluster has as many firsts as seconds: no evidence either way
            out.append(1.0)
        else:
            out.append(float(2 * sps.norm.sf(abs(total[g]) / math.sqrt(v[g]))))
    return out[0] if one else out


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (None entries are not tests and
    stay None); adjusted values are monotone in the raw ones and at most 1."""
    index = [i for i, p in enumerate(p_values) if p is not None]
    m = len(index)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(index, key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def format_p(p: float | None) -> str:
    """A p-value as printed everywhere: three decimals, "< 0.001" below that, "" when none."""
    if p is None:
        return ""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def bootstrap_stat_ci(
    counts: np.ndarray, parts: np.ndarray, stat, level: float = 0.95
) -> tuple[float | None, float | None]:
    """Percentile interval of a statistic computed from sums of per-cluster ``parts``
    (clusters × k): ``stat`` maps a (resamples × k) matrix of sums to (value, observed
    agreement, chance agreement) arrays. When every resample agrees, the interval falls back to
    Wilson's on the observed agreement with the number of clusters, put on the statistic's
    scale ((a − chance) / (1 − chance)), so it never collapses to a point."""
    if counts.shape[1] == 0 or parts.shape[0] == 0:
        return (None, None)
    point, p_o, p_e = (float(v[0]) for v in stat(parts.sum(axis=0, keepdims=True)))
    if np.isnan(point):
        return (None, None)
    values = stat((counts @ parts.astype(np.float32)).astype(np.float64))[0]
    values = values[~np.isnan(values)]
    if values.size == 0:
        return (None, None)
    lo, hi = np.percentile(values, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    if hi - lo < 1e-12 and p_e < 1:
        clusters = float((np.abs(parts).sum(axis=1) > 0).sum())
        a_lo, a_hi = wilson(p_o * clusters, clusters, z=_z(level))
        lo, hi = (a_lo - p_e) / (1 - p_e), (a_hi - p_e) / (1 - p_e)
    return (float(lo), float(hi))


def fleiss_kappa(table: np.ndarray) -> float | None:
    """Fleiss' kappa from a subjects × categories count table; subjects may have different
    numbers of ratings (each needs at least two). None when undefined.
    """
    table = np.asarray(table, dtype=float)
    n_i = table.sum(axis=1)
    table, n_i = table[n_i >= 2], n_i[n_i >= 2]
    if len(table) == 0:
        return None
    p_j = table.sum(axis=0) / n_i.sum()
    p_i = ((table * table).sum(axis=1) - n_i) / (n_i * (n_i - 1))
    p_bar, p_e = p_i.mean(), (p_j * p_j).sum()
    if p_e >= 1:
        return None
    return float((p_bar - p_e) / (1 - p_e))


def krippendorff_alpha_nominal(table: np.ndarray) -> float | None:
    """Krippendorff's alpha for nominal data from a units × values count table (how many coders
    gave each value to each unit). Units with fewer than two values are not pairable and left
    out. None when undefined (fewer than two pairable values, or only one value used).
    """
    table = np.asarray(table, dtype=float)
    m_u = table.sum(axis=1)
    table, m_u = table[m_u >= 2], m_u[m_u >= 2]
    if len(table) == 0:
        return None
    # Coincidence matrix o_ck = sum_u (n_uc n_uk - [c=k] n_uc) / (m_u - 1).
    weighted = table / (m_u - 1)[:, None]
    coincid = weighted.T @ table - np.diag(weighted.sum(axis=0))
    n_c = coincid.sum(axis=1)
    n = n_c.sum()
    disagree_obs = coincid.sum() - np.trace(coincid)
    disagree_exp = (n_c.sum() ** 2 - (n_c * n_c).sum()) / (n - 1)
    if disagree_exp == 0:
        return None
    return float(1 - disagree_obs / disagree_exp)


def cohen_kappa(a: np.ndarray, b: np.ndarray, categories: tuple = (-1, 0, 1)) -> float | None:
    """Cohen's kappa of two raters' labels over the same units; None when undefined."""
    a, b = np.asarray(a), np.asarray(b)
    if len(a) == 0:
        return None
    k = len(categories)
    # Each label's category as one comparison per category (a lookup per unit was most of the
    # time at a million votes); the counts are whole numbers, so the table is the same.
    codes = []
    for labels in (a, b):
        hit = labels[:, None] == np.asarray(categories)[None, :]
        if not hit.any(axis=1).all():
            raise KeyError(labels[~hit.any(axis=1)][0])
        codes.append(hit.argmax(axis=1))
    conf = np.bincount(codes[0] * k + codes[1], minlength=k * k).reshape(k, k).astype(float)
    n = conf.sum()
    p_o = np.trace(conf) / n
    p_e = (conf.sum(axis=0) * conf.sum(axis=1)).sum() / (n * n)
    if p_e >= 1:
        return None
    return float((p_o - p_e) / (1 - p_e))


def _average_ranks(codes: np.ndarray, k: int) -> np.ndarray:
    """Ranks 1..n of values given as dense codes 0..k-1 in value order, tied values sharing
    their mean rank (as scipy's rankdata): a count per code, no sort."""
    counts = np.bincount(codes, minlength=k)
    upper = np.cumsum(counts)
    return (upper - (counts - 1) / 2.0)[codes]


def _centred_ranks(codes: np.ndarray, k: int) -> np.ndarray:
    ranks = _average_ranks(codes, k)
    ranks -= ranks.mean()
    return ranks


def centred_ranks_of_rows(codes: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """``_centred_ranks`` of each row of ``codes`` (rows × units, each row dense codes in value
    order) and its sum of squares, from one count over all rows: a study with many judges ranks
    them per shared set of units without a numpy call per judge. Each row's figures are those of
    ranking it alone, bit for bit (a row's mean is summed along the row, as for one array)."""
    m = codes.shape[0]
    k = int(codes.max(initial=-1)) + 1
    counts = np.bincount((codes + np.arange(m)[:, None] * k).ravel(), minlength=m * k).reshape(m, k)
    ranks = np.take_along_axis(counts.cumsum(axis=1) - (counts - 1) / 2.0, codes, axis=1)
    if codes.shape[1]:
        ranks -= ranks.mean(axis=1, keepdims=True)
    # A copy of each row: an array of its own, as ranking the row alone gives.
    return [(r, float(r @ r)) for r in (row.copy() for row in ranks)]


def _pearson_of_ranks(ca: np.ndarray, ka: int, cb: np.ndarray, kb: int) -> float | None:
    if len(ca) < 3:
        return None
    return _pearson_of_centred(_centred_ranks(ca, ka), _centred_ranks(cb, kb))


def _pearson_of_centred(ra: np.ndarray, rb: np.ndarray, squares: tuple[float, float] | None = None) -> float | None:
    """``squares``: (ra @ ra, rb @ rb) when the caller has them (a column's, once for all pairs)."""
    saa, sbb = squares or (float(ra @ ra), float(rb @ rb))
    denom = math.sqrt(saa * sbb)
    if denom == 0:
        return None
    rho = float(ra @ rb / denom)
    # Rounding can take it past ±1; numpy's clip costs more than the rest for thousands of pairs.
    return rho if -1.0 <= rho <= 1.0 else float(np.clip(rho, -1.0, 1.0))


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks; None when undefined (fewer than 3
    pairs, or one side constant)."""
    _, ca = np.unique(np.asarray(a, dtype=float), return_inverse=True)
    _, cb = np.unique(np.asarray(b, dtype=float), return_inverse=True)
    return _pearson_of_ranks(ca.ravel(), len(ca), cb.ravel(), len(cb))


def spearman_pairs(scores: np.ndarray) -> list[tuple[int, int, float | None, int]]:
    """Spearman's rho of every pair of columns of ``scores`` (units × raters, NaN = not rated)
    over the units both rated: (i, j, rho, n). Values are coded once per column, so that a
    study with many judges (thousands of pairs) costs a count per pair, not a sort."""
    codes = np.full(scores.shape, -1, dtype=np.int64)
    # Columns that rated the same units (every judge of a fully crossed design) share their
    # ranks over them: ranked once per column, not once per pair.
    mask_of, own_ranks, masks = [], [], []
    mask_ids: dict[bytes, int] = {}
    for j in range(scores.shape[1]):
        seen = ~np.isnan(scores[:, j])
        _, codes[seen, j] = np.unique(scores[seen, j], return_inverse=True)
        mask_of.append(mask_ids.setdefault(seen.tobytes(), len(mask_ids)))
        if mask_of[-1] == len(masks):
            masks.append(seen)
        own_ranks.append(_centred_ranks(codes[seen, j], int(codes[seen, j].max(initial=-1)) + 1))
    own_squares = [float(r @ r) for r in own_ranks]
    # Otherwise a column's ranks over the units it shares with another depend only on the
    # other's set of units: a study whose judges saw a few different sets (LLMBar's subsets)
    # ranks each column once per set, not once per pair.
    shared: dict[tuple[int, int], np.ndarray] = {}
    ranks_over: dict[tuple[int, tuple[int, int]], tuple[np.ndarray, float]] = {}

    def centred_over(column: int, key: tuple[int, int]) -> tuple[np.ndarray, float]:
        if (column, key) not in ranks_over:
            # Every column of either set of units, ranked over the shared units at once.
            columns = [c for c in range(scores.shape[1]) if mask_of[c] in key]
            block = np.ascontiguousarray(codes[shared[key]][:, columns].T)
            for c, ranked in zip(columns, centred_ranks_of_rows(block), strict=True):
                ranks_over[c, key] = ranked
        return ranks_over[column, key]

    out = []
    for i in range(scores.shape[1]):
        for j in range(i + 1, scores.shape[1]):
            if mask_of[i] == mask_of[j]:
                n = len(own_ranks[i])
                squares = (own_squares[i], own_squares[j])
                rho = _pearson_of_centred(own_ranks[i], own_ranks[j], squares) if n >= 3 else None
                out.append((i, j, rho, n))
                continue
            key = (min(mask_of[i], mask_of[j]), max(mask_of[i], mask_of[j]))
            if key not in shared:
                shared[key] = masks[key[0]] & masks[key[1]]
            n = int(shared[key].sum())
            (ra, saa), (rb, sbb) = centred_over(i, key), centred_over(j, key)
            rho = _pearson_of_centred(ra, rb, (saa, sbb)) if n >= 3 else None
            out.append((i, j, rho, n))
    return out


def ranks(values: dict[str, float | None], *, lower_is_better: bool) -> dict[str, int | None]:
    """Competition ranks (1 = best, ties share the better rank); undefined values get none."""
    defined = {k: v for k, v in values.items() if v is not None}
    ordered = sorted(defined.values(), reverse=not lower_is_better)
    out: dict[str, int | None] = {k: None for k in values}
    for key, value in defined.items():
        out[key] = ordered.index(value) + 1
    return out


# Agreement coefficients as functions of per-question sums, so that one matrix product with the
# bootstrap counts gives them for every resample (bootstrap_stat_ci). Each returns (value,
# observed agreement, chance agreement) per row of ``sums``.


def agreement_parts(table: np.ndarray, question: np.ndarray, n_questions: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-question sums for Fleiss' kappa (sum of P_i, items, category totals, ratings) and
    for Krippendorff's alpha (the 3 × 3 coincidence contributions) from a units × 3 table."""
    table = np.asarray(table, dtype=float)
    n_i = table.sum(axis=1)
    pairable = n_i >= 2
    table, n_i, question = table[pairable], n_i[pairable], question[pairable]
    p_i = ((table * table).sum(axis=1) - n_i) / (n_i * (n_i - 1))
    fleiss = np.column_stack([p_i, np.ones_like(p_i), table, n_i])
    weighted = table / (n_i - 1)[:, None]
    coincid = weighted[:, :, None] * table[:, None, :]
    k = table.shape[1]
    coincid[:, np.arange(k), np.arange(k)] -= weighted
    alpha = coincid.reshape(len(table), k * k)

    def by_question(parts: np.ndarray) -> np.ndarray:
        return np.stack(
            [np.bincount(question, weights=parts[:, j], minlength=n_questions) for j in range(parts.shape[1])], axis=1
        )

    return by_question(fleiss), by_question(alpha)


def confusion_parts(a: np.ndarray, b: np.ndarray, question: np.ndarray, n_questions: int) -> np.ndarray:
    """Per-question 3 × 3 confusion counts (flattened) of two raters' labels in −1/0/1."""
    cell = (np.asarray(a, dtype=np.int64) + 1) * 3 + (np.asarray(b, dtype=np.int64) + 1)
    flat = np.bincount(np.asarray(question, dtype=np.int64) * 9 + cell, minlength=9 * n_questions)
    return flat.reshape(n_questions, 9).astype(float)


def _kappa(p_o: np.ndarray, p_e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p_e < 1, (p_o - p_e) / (1 - p_e), np.nan), p_o, p_e


def fleiss_from_sums(sums: np.ndarray):
    with np.errstate(invalid="ignore", divide="ignore"):
        p_bar = sums[:, 0] / sums[:, 1]
        p_j = sums[:, 2:-1] / sums[:, -1:]
    return _kappa(p_bar, (p_j * p_j).sum(axis=1))


def alpha_from_sums(sums: np.ndarray):
    k = int(round(math.sqrt(sums.shape[1])))
    coincid = sums.reshape(-1, k, k)
    n_c = coincid.sum(axis=2)
    n = n_c.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        a_o = np.trace(coincid, axis1=1, axis2=2) / n
        a_e = (n_c * (n_c - 1)).sum(axis=1) / (n * (n - 1))
    return _kappa(a_o, a_e)


def cohen_from_sums(sums: np.ndarray):
    conf = sums.reshape(-1, 3, 3)
    n = conf.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = np.trace(conf, axis1=1, axis2=2) / n
        p_e = (conf.sum(axis=1) * conf.sum(axis=2)).sum(axis=1) / (n * n)
    return _kappa(p_o, p_e)
