"""Length-controlled win rates after Dubois et al. 2024 (Length-Controlled AlpacaEval).

For one judge, each item is a game between the baseline A1 and a competitor (the group's A2 or
A2p). The judge's preference for the competitor (votes for A2 + half the ties, over all votes)
is modelled as

    logit P(competitor) = θ_g + φ_g · tanh(Δlen / std(Δlen)) + ψ_g · γ_q

with one group term θ_g, length slope φ_g and difficulty weight ψ_g per group, and one
difficulty γ_q per question fitted jointly across groups. The slope is pooled,
φ_g = φ_0 + δ_g: a perturbation such as rich content lengthens almost every answer by a similar
amount, so within its group Δlen barely varies and a free φ_g cannot be told apart from θ_g
(the fit then swings between "all length" and "no length" with the penalty). The control
group's two-sided length differences identify the judge's own length preference φ_0; the
group deviations δ_g carry the stronger penalty (10λ), so a group earns its own slope only
when its data show one. L2 penalty λ on φ_0, γ and ψ, λ/100 on θ (only to keep it finite when
a group is separable); λ chosen by K-fold cross-validation over items (held-out log loss).

The length-controlled win rate of g is mean_q logistic(θ_g + ψ_g·γ_q): the same prediction with
Δlen = 0. The model is odd in (y, Δlen) → (1 − y, −Δlen) with the same penalty, so swapping the
two sides gives exactly 1 − x, and a group whose two sides are exchangeable gives 1/2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

LAMBDAS = (0.1, 1.0, 10.0)
PHI_FACTOR = 10.0
THETA_FACTOR = 0.01


@dataclass
class LCResult:
    groups: list[str]
    lc_winrate: dict[str, float]
    raw_winrate: dict[str, float]
    theta: dict[str, float]
    phi: dict[str, float]
    lam: float
    length_scale: float


def _unpack(x: np.ndarray, n_g: int, n_q: int):
    """θ, φ (= φ_0 + δ), ψ, γ, and the raw φ_0 and δ."""
    theta, phi0, dev = x[:n_g], x[n_g], x[n_g + 1 : 2 * n_g + 1]
    psi, gamma = x[2 * n_g + 1 : 3 * n_g + 1], x[3 * n_g + 1 : 3 * n_g + 1 + n_q]
    return theta, phi0 + dev, psi, gamma, phi0, dev


def _objective(x, g, q, t, y, w, n_g, n_q, lam):
    theta, phi, psi, gamma, phi0, dev = _unpack(x, n_g, n_q)
    eta = theta[g] + phi[g] * t + psi[g] * gamma[q]
    p = expit(eta)
    # Binomial log loss with fractional outcomes; logaddexp keeps it finite for large |eta|.
    loss = np.sum(w * (np.logaddexp(0.0, eta) - y * eta))
    r = w * (p - y)
    d_theta = np.bincount(g, weights=r, minlength=n_g)
    d_phi = np.bincount(g, weights=r * t, minlength=n_g)
    d_psi = np.bincount(g, weights=r * gamma[q], minlength=n_g)
    d_gamma = np.bincount(q, weights=r * psi[g], minlength=n_q)
    loss += lam * (THETA_FACTOR * theta @ theta + phi0 * phi0 + PHI_FACTOR * dev @ dev + psi @ psi + gamma @ gamma)
    grad = np.concatenate(
        [
            d_theta + 2 * lam * THETA_FACTOR * theta,
            [d_phi.sum() + 2 * lam * phi0],
            d_phi + 2 * lam * PHI_FACTOR * dev,
            d_psi + 2 * lam * psi,
            d_gamma + 2 * lam * gamma,
        ]
    )
    return loss, grad


def _fit(g, q, t, y, w, n_g, n_q, lam, x0=None) -> np.ndarray:
    if x0 is None:
        x0 = np.concatenate([np.zeros(2 * n_g + 1), np.ones(n_g), np.zeros(n_q)])
    res = minimize(
        _objective,
        x0,
        args=(g, q, t, y, w, n_g, n_q, lam),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 500, "gtol": 1e-7},
    )
    return res.x


def fit(
    groups: np.ndarray,
    questions: np.ndarray,
    delta_len: np.ndarray,
    y: np.ndarray,
    weight: np.ndarray,
    *,
    lambdas: tuple[float, ...] = LAMBDAS,
    folds: int = 3,
    seed: int = 0,
) -> LCResult | None:
    """Fit the model on items (one row each). ``y`` is the share of the competitor's wins with
    ties as half; ``weight`` the number of votes. None when there is nothing to fit."""
    keep = (weight > 0) & ~np.isnan(delta_len)
    if not keep.any():
        return None
    groups, questions = np.asarray(groups)[keep], np.asarray(questions)[keep]
    delta_len, y, weight = delta_len[keep].astype(float), y[keep].astype(float), weight[keep].astype(float)
    group_names, g = np.unique(groups.astype(str), return_inverse=True)
    _, q = np.unique(questions, return_inverse=True)
    n_g, n_q = len(group_names), int(q.max()) + 1
    scale = float(np.std(delta_len))
    t = np.tanh(delta_len / scale) if scale > 0 else np.zeros_like(delta_len)

    lam = _choose_lambda(g, q, t, y, weight, n_g, n_q, lambdas, folds, seed)
    x = _fit(g, q, t, y, weight, n_g, n_q, lam)
    theta, phi, psi, gamma, _, _ = _unpack(x, n_g, n_q)
    lc, raw = {}, {}
    for j, name in enumerate(group_names):
        in_g = g == j
        qs = np.unique(q[in_g])
        lc[str(name)] = float(np.mean(expit(theta[j] + psi[j] * gamma[qs])))
        raw[str(name)] = float(np.sum(y[in_g] * weight[in_g]) / np.sum(weight[in_g]))
    return LCResult(
        groups=[str(n) for n in group_names],
        lc_winrate=lc,
        raw_winrate=raw,
        theta={str(n): float(theta[j]) for j, n in enumerate(group_names)},
        phi={str(n): float(phi[j]) for j, n in enumerate(group_names)},
        lam=lam,
        length_scale=scale,
    )


def _choose_lambda(g, q, t, y, w, n_g, n_q, lambdas, folds, seed) -> float:
    if len(lambdas) == 1 or len(y) < 2 * folds:
        return float(lambdas[len(lambdas) // 2])
    fold_of = np.random.default_rng(seed).permutation(len(y)) % folds
    losses = []
    for lam in lambdas:
        total = 0.0
        for k in range(folds):
            train, test = fold_of != k, fold_of == k
            x = _fit(g[train], q[train], t[train], y[train], w[train], n_g, n_q, lam)
            theta, phi, psi, gamma, _, _ = _unpack(x, n_g, n_q)
            # A question unseen in training keeps γ = 0 (its penalised value).
            eta = theta[g[test]] + phi[g[test]] * t[test] + psi[g[test]] * gamma[q[test]]
            total += float(np.sum(w[test] * (np.logaddexp(0.0, eta) - y[test] * eta)))
        losses.append(total)
    return float(lambdas[int(np.argmin(losses))])
