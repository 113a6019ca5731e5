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
from scipy.special import expit

LAMBDAS = (0.1, 1.0, 10.0)
# Cross-validation of λ runs on at most this many questions (all their items). The penalty
# matters for small studies; in big ones the data dominate it, and CV on every item of 10,000
# questions would cost more than the rest of the analysis together.
CV_MAX_QUESTIONS = 2000
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


def _loss(x, g, q, t, y, w, n_g, n_q, lam) -> float:
    theta, phi, psi, gamma, phi0, dev = _unpack(x, n_g, n_q)
    eta = theta[g] + phi[g] * t + psi[g] * gamma[q]
    penalty = THETA_FACTOR * theta @ theta + phi0 * phi0 + PHI_FACTOR * dev @ dev + psi @ psi + gamma @ gamma
    return float(np.sum(w * (np.logaddexp(0.0, eta) - y * eta)) + lam * penalty)


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


def _fit(g, q, t, y, w, n_g, n_q, lam, x0=None, *, max_iter: int = 100, tol: float = 1e-7) -> np.ndarray:
    """Minimise the penalised loss by Newton steps on all parameters at once (Gauss-Newton
    where the exact Hessian does not give a step downhill). The Hessian
    is an arrow: a small dense block for the 3·groups + 1 group terms (θ, φ_0, δ, ψ) and a
    diagonal for the γ (each item has one question), so the step is solved through the Schur
    complement of the diagonal. Every block is a per-group or per-question sum (bincount), with
    no design matrix; a halving line search keeps each step downhill. Deterministic, so the
    model's mirror symmetry carries over to the fitted values."""
    x = np.concatenate([np.zeros(2 * n_g + 1), np.ones(n_g), np.zeros(n_q)]) if x0 is None else x0.copy()
    m = 3 * n_g + 1
    penalty = np.concatenate([np.full(n_g, THETA_FACTOR), [1.0], np.full(n_g, PHI_FACTOR), np.ones(n_g)]) * lam
    cell = g * n_q + q  # (group, question) of each item, for the cross block
    th, dl, ps = slice(0, n_g), slice(n_g + 1, 2 * n_g + 1), slice(2 * n_g + 1, m)

    def by_group(weights):
        return np.bincount(g, weights=weights, minlength=n_g)

    def by_cell(weights):
        return np.bincount(cell, weights=weights, minlength=n_g * n_q).reshape(n_g, n_q)

    loss = _loss(x, g, q, t, y, w, n_g, n_q, lam)
    for _ in range(max_iter):
        theta, phi, psi, gamma, _, _ = _unpack(x, n_g, n_q)
        gq = gamma[q]
        p = expit(theta[g] + phi[g] * t + psi[g] * gq)
        r, s = w * (p - y), w * p * (1 - p)
        g_beta = np.concatenate([by_group(r), [np.sum(r * t)], by_group(r * t), by_group(r * gq)])
        g_beta += 2 * penalty * x[:m]
        g_gamma = np.bincount(q, weights=r * psi[g], minlength=n_q) + 2 * lam * gamma
        st, stt, sg = s * t, s * t * t, s * gq
        h_bb = np.diag(2 * penalty)
        h_bb[th, th] += np.diag(by_group(s))
        h_bb[dl, dl] += np.diag(by_group(stt))
        h_bb[ps, ps] += np.diag(by_group(sg * gq))
        h_bb[th, dl] += np.diag(by_group(st))
        h_bb[th, ps] += np.diag(by_group(sg))
        h_bb[dl, ps] += np.diag(by_group(st * gq))
        h_bb[n_g, n_g] += np.sum(stt)
        h_bb[th, n_g] += by_group(st)
        h_bb[n_g, dl] += by_group(stt)
        h_bb[n_g, ps] += by_group(st * gq)
        h_bb = np.triu(h_bb) + np.triu(h_bb, 1).T
        sp = s * psi[g]
        h_gg = np.bincount(q, weights=sp * psi[g], minlength=n_q) + 2 * lam
        h_bg = np.vstack(
            [
                by_cell(sp),
                np.bincount(q, weights=sp * t, minlength=n_q)[None, :],
                by_cell(sp * t),
                by_cell(sp * gq),
            ]
        )
        g_all = np.concatenate([g_beta, g_gamma])
        # The exact Newton step first: the bilinear ψ·γ term's second derivative adds the
        # residual r to the (ψ_g, γ_q) block, and with it the steps converge in a few
        # iterations instead of linearly. Away from the optimum that Hessian need not be
        # positive, so when its step does not lead downhill the Gauss-Newton step (always
        # a descent direction) is taken instead.
        h_newton = h_bg.copy()
        h_newton[ps] += by_cell(r)
        trial = None
        for h in (h_newton, h_bg):
            step = _schur_step(h_bb, h_bg=h, h_gg=h_gg, g_beta=g_beta, g_gamma=g_gamma)
            if step is None or g_all @ step >= 0:
                continue
            trial, new_loss = _line_search(lambda z: _loss(z, g, q, t, y, w, n_g, n_q, lam), x, step, loss)
            if trial is not None:
                break
        if trial is None:
            break
        x, improvement, loss = trial, loss - new_loss, new_loss
        if improvement <= tol * max(1.0, abs(loss)):
            break
    return x


def _schur_step(h_bb, *, h_bg, h_gg, g_beta, g_gamma) -> np.ndarray | None:
    """Solve the arrow-shaped system [[h_bb, h_bg], [h_bg.T, diag(h_gg)]] · d = -grad through the
    Schur complement of the diagonal block; None when the small block is singular."""
    a = h_bg / h_gg
    try:
        d_beta = -np.linalg.solve(h_bb - a @ h_bg.T, g_beta - a @ g_gamma)
    except np.linalg.LinAlgError:
        return None
    d_gamma = -(g_gamma + h_bg.T @ d_beta) / h_gg
    return np.concatenate([d_beta, d_gamma])


def _line_search(loss_at, x: np.ndarray, step: np.ndarray, loss: float, halvings: int = 30):
    """The first of x + step, x + step/2, ... that does not increase the loss, with its loss;
    (None, loss) when none does."""
    for _ in range(halvings):
        trial = x + step
        new_loss = loss_at(trial)
        if new_loss <= loss:
            return trial, new_loss
        step = step / 2
    return None, loss


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

    if n_q > CV_MAX_QUESTIONS and len(lambdas) > 1:
        chosen = np.random.default_rng(seed).choice(n_q, CV_MAX_QUESTIONS, replace=False)
        sub = np.isin(q, chosen)
        _, q_sub = np.unique(q[sub], return_inverse=True)
        lam, _ = _choose_lambda(g[sub], q_sub, t[sub], y[sub], weight[sub], n_g, CV_MAX_QUESTIONS, lambdas, folds, seed)
        x = _fit(g, q, t, y, weight, n_g, n_q, lam)
    else:
        lam, x = _choose_lambda(g, q, t, y, weight, n_g, n_q, lambdas, folds, seed)
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


def _choose_lambda(g, q, t, y, w, n_g, n_q, lambdas, folds, seed) -> tuple[float, np.ndarray]:
    """K-fold cross-validation of λ over items (held-out log loss). Returns λ and the fit on all
    items with it. Fits are warm-started: each λ from the previous one, each fold from the
    full fit at its λ, which cuts the Newton steps several-fold."""
    lambdas = sorted(lambdas, reverse=True)
    full, x = [], None
    for lam in lambdas:
        x = _fit(g, q, t, y, w, n_g, n_q, lam, x0=x)
        full.append(x)
    if len(lambdas) == 1 or len(y) < 2 * folds:
        return float(lambdas[len(lambdas) // 2]), full[len(lambdas) // 2]
    fold_of = np.random.default_rng(seed).permutation(len(y)) % folds
    losses = []
    for lam, x_full in zip(lambdas, full, strict=True):
        total = 0.0
        for k in range(folds):
            train, test = fold_of != k, fold_of == k
            x_k = x_full.copy()
            # Questions with no training item start (and stay) at the penalised γ = 0.
            seen = np.zeros(n_q, bool)
            seen[q[train]] = True
            x_k[3 * n_g + 1 :][~seen] = 0.0
            x_k = _fit(g[train], q[train], t[train], y[train], w[train], n_g, n_q, lam, x0=x_k)
            theta, phi, psi, gamma, _, _ = _unpack(x_k, n_g, n_q)
            eta = theta[g[test]] + phi[g[test]] * t[test] + psi[g[test]] * gamma[q[test]]
            total += float(np.sum(w[test] * (np.logaddexp(0.0, eta) - y[test] * eta)))
        losses.append(total)
    best = int(np.argmin(losses))
    return float(lambdas[best]), full[best]
