"""A simulated judge with set biases, voting on a study's items. Pure numpy/pandas.

Each vote is a tie with probability ``tie_rate``; otherwise it goes to A2 with probability
σ(u), where u (log-odds of A2 over A1) is

    quality(A2's original) − quality(A1's original)        # latent, sd ``noise`` per pair
    + susceptibility[group]                                 # pull towards the perturbed side
    + length_per_token · (len A2 − len A1)                  # in words
    ± position                                              # + when A2 is shown first

so ``position`` > 0 favours the answer shown first and ``susceptibility`` < 0 means the judge
sees through a degrading perturbation. Orders are balanced: half the rounds show A1 first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

DEFAULT_SUSCEPTIBILITY = {"factual_error": -2.0, "reference": 0.4, "rich_content": 0.6, "reference_rich_content": 0.8}


@dataclass
class JudgeParams:
    position: float = 0.0
    length_per_token: float = 0.0
    susceptibility: dict[str, float] = field(default_factory=dict)
    tie_rate: float = 0.1
    noise: float = 1.0
    # Response time (ms) of simulated people: lognormal around this median; None for machines.
    median_ms: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> JudgeParams:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def log_odds_a2(items: pd.DataFrame, params: JudgeParams, quality: dict[int, float]) -> np.ndarray:
    """u for each item with A1 shown first (the position term is added per vote)."""
    q_a1 = items["a1_root"].map(quality).to_numpy(dtype=float)
    q_a2 = items["a2_root"].map(quality).to_numpy(dtype=float)
    suscept = items["group"].astype(str).map(lambda g: params.susceptibility.get(g, 0.0)).to_numpy(dtype=float)
    delta = (items["len_a2_words"] - items["len_a1_words"]).to_numpy(dtype=float)
    return q_a2 - q_a1 + suscept + params.length_per_token * delta


def draw_quality(items: pd.DataFrame, params: JudgeParams, rng: np.random.Generator) -> dict[int, float]:
    roots = np.unique(np.concatenate([items["a1_root"].to_numpy(), items["a2_root"].to_numpy()]))
    # Differences of two originals then have standard deviation `noise`.
    return dict(zip(roots.tolist(), rng.normal(0.0, params.noise / np.sqrt(2), len(roots)).tolist(), strict=False))


def simulate_votes(items: pd.DataFrame, params: JudgeParams, *, votes_per_item: int, seed: int = 0) -> pd.DataFrame:
    """Votes on ``items`` (columns item_id, group, a1_root, a2_root, len_a1_words, len_a2_words):
    one row per vote with item_id, round, shown_first, choice_shown, choice, client_ms."""
    rng = np.random.default_rng(seed)
    quality = draw_quality(items, params, rng)
    base = log_odds_a2(items, params, quality)
    n_items, k = len(items), votes_per_item
    item_idx = np.repeat(np.arange(n_items), k)
    rounds = np.tile(np.arange(k), n_items)
    # Balanced orders: alternate by round, starting side random per item (matters for odd k).
    start = rng.integers(0, 2, n_items)[item_idx]
    a2_first = ((rounds + start) % 2).astype(bool)
    u = base[item_idx] + np.where(a2_first, params.position, -params.position)
    draw = rng.random(len(u))
    tie = draw < params.tie_rate
    pick_a2 = ~tie & (rng.random(len(u)) < expit(u))
    choice = np.where(tie, "tie", np.where(pick_a2, "a2", "a1"))
    picked_first = np.where(a2_first, pick_a2, ~pick_a2)
    choice_shown = np.where(tie, "tie", np.where(picked_first, "first", "second"))
    if params.median_ms:
        client_ms = np.round(params.median_ms * np.exp(rng.normal(0.0, 0.6, len(u))))
    else:
        client_ms = np.full(len(u), np.nan)
    return pd.DataFrame(
        {
            "item_id": items["item_id"].to_numpy()[item_idx],
            "round": rounds,
            "shown_first": np.where(a2_first, "a2", "a1"),
            "choice_shown": choice_shown,
            "choice": choice,
            "client_ms": client_ms,
        }
    )


def expected_item_probabilities(
    items: pd.DataFrame, params: JudgeParams, *, votes_per_item: int, quality: dict[int, float] | None = None
) -> pd.DataFrame:
    """Exact probabilities of each item preference (A1 / A2 / Tie) under the judge model, for
    checking that the analysis recovers what was put in. Needs an even ``votes_per_item`` (half
    the votes in each order) and, unless noise is 0, the realised ``quality``."""
    if votes_per_item % 2:
        raise ValueError("expected probabilities need an even number of votes per item")
    quality = quality or {int(r): 0.0 for r in np.unique(items[["a1_root", "a2_root"]].to_numpy())}
    base = log_odds_a2(items, params, quality)
    half = votes_per_item // 2
    t = params.tie_rate
    out = np.zeros((len(items), 3))
    # Distribution of (A1 − A2) votes within each order, then convolve the two halves.
    for i, u in enumerate(base):
        dists = []
        for sign in (-1, 1):
            p2 = (1 - t) * expit(u + sign * params.position)
            p1 = 1 - t - p2
            dists.append(_score_distribution(half, p1, p2, t))
        total = np.convolve(dists[0], dists[1])
        mid = len(total) // 2
        out[i] = [total[mid + 1 :].sum(), total[:mid].sum(), total[mid]]
    return pd.DataFrame(out, columns=["p_a1", "p_a2", "p_tie"], index=items.index)


def _score_distribution(n: int, p1: float, p2: float, pt: float) -> np.ndarray:
    """P(votes A1 − votes A2 = s) for s in −n..n after n votes."""
    dist = np.zeros(2 * n + 1)
    dist[n] = 1.0
    for _ in range(n):
        new = dist * pt
        new[1:] += dist[:-1] * p1
        new[:-1] += dist[1:] * p2
        dist = new
    return dist
