"""Small statistics: intervals, tests and agreement coefficients. Pure numpy/scipy."""

from __future__ import annotations

import math

import numpy as np
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
    return (max(0.0, centre - half), min(1.0, centre + half))


def binomial_p(k: int, n: int) -> float | None:
    """Two-sided exact binomial test of k successes in n trials against 1/2."""
    if n <= 0:
        return None
    return float(sps.binomtest(int(k), int(n), 0.5).pvalue)


def bootstrap_counts(n: int, *, reps: int, seed: int) -> np.ndarray:
    """reps × n matrix: how often each of n units is drawn in each resample with replacement."""
    if n == 0:
        return np.zeros((reps, 0), dtype=np.float32)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(reps, n))
    flat = (np.arange(reps)[:, None] * n + draws).ravel()
    return np.bincount(flat, minlength=reps * n).reshape(reps, n).astype(np.float32)


def bootstrap_ratio_ci(
    counts: np.ndarray, hits: np.ndarray, bases: np.ndarray, level: float = 0.95
) -> list[tuple[float | None, float | None]]:
    """Percentile intervals of ratios sum(hit)/sum(base) over resampled units.

    ``hits`` and ``bases`` are units × metrics (0/1 weights); one BLAS call per matrix.
    Resamples whose base set is empty are left out (the ratio is undefined there).
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
        else:
            lo, hi = np.percentile(col, [lo_q, hi_q])
            out.append((float(lo), float(hi)))
    return out


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
    index = {c: i for i, c in enumerate(categories)}
    conf = np.zeros((k, k))
    np.add.at(conf, ([index[x] for x in a], [index[x] for x in b]), 1)
    n = conf.sum()
    p_o = np.trace(conf) / n
    p_e = (conf.sum(axis=0) * conf.sum(axis=1)).sum() / (n * n)
    if p_e >= 1:
        return None
    return float((p_o - p_e) / (1 - p_e))


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3:
        return None
    rho = sps.spearmanr(a, b).statistic
    return None if np.isnan(rho) else float(rho)


def ranks(values: dict[str, float | None], *, lower_is_better: bool) -> dict[str, int | None]:
    """Competition ranks (1 = best, ties share the better rank); undefined values get none."""
    defined = {k: v for k, v in values.items() if v is not None}
    ordered = sorted(defined.values(), reverse=not lower_is_better)
    out: dict[str, int | None] = {k: None for k in values}
    for key, value in defined.items():
        out[key] = ordered.index(value) + 1
    return out
