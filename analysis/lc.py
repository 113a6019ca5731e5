"""Length-controlled win rates after Dubois et al. 2024 (Length-Controlled AlpacaEval).

For one judge, each item is a game between the baseline A1 and a competitor (the group's A2 or
A2p); y is the judge's preference for the competitor (votes for it + half the ties, over all
votes), weighted by the number of votes. The model is

    logit P(competitor) = θ_g + φ · t + ψ_g · z,      t = tanh(Δlen / rms(Δlen))

fitted in two stages, each a convex penalised logistic regression with one global optimum
(scipy's Newton-CG with the exact Hessian):

1. **The control items alone** (A1 vs A2, the baseline comparison of each question):
   logit = θ_c + φ · t + γ_q, one difficulty γ_q per question. γ_q is how much this judge
   prefers the question's A2 over its A1 with length taken out; φ is the judge's length
   preference. It is measured here because only here do the two answers differ in length
   independently of any perturbation: a perturbation such as rich content lengthens almost
   every answer by a similar amount, so within its group a slope cannot be told apart from the
   group term, and a fitted one extrapolates to Δlen = 0 from far away.
2. **The perturbation groups**, with φ and γ fixed: logit = θ_g + φ · t + ψ_g · z, where
   z = ±γ_q is oriented to the item: + when its competitor was made from the control's A2,
   − when made from the control's A1, 0 when the question has no control item.

Penalties: λ on φ, γ and ψ; ``THETA_FACTOR`` λ on θ (only to keep it finite when a group is
separable). λ is chosen by K-fold cross-validation with folds grouped by question (held-out log
loss of the perturbation groups' items; the control items are the first stage's data and so,
like AlpacaEval's instruction difficulty, a covariate rather than a target). Without control
items there is no length preference to measure and ``fit`` returns None.

The length-controlled win rate of g is the mean over its items of logistic(θ_g + ψ_g · z)
(control: logistic(θ_c + γ_q)): the same prediction with Δlen = 0.

Why the win-rate properties hold exactly. Swapping the two sides of group g maps its rows
(y, t) → (1 − y, −t). The length scale is a root mean square, so it does not change; the
mirrored parameters (θ_g, ψ_g) → (−θ_g, −ψ_g) give the mirrored loss with the same penalty, and
since the problem is strictly convex that mirror is its only optimum: the rate becomes 1 − x.
Other groups never see g's rows. Swapping the control maps (θ_c, φ, γ) → (−θ_c, φ, −γ) the
same way, and the other groups absorb the sign of γ by ψ_g → −ψ_g, so their rates stay. A group
whose two sides are exchangeable is its own mirror and gets exactly 1/2.

Each rate and effect carries a 95% interval from a cluster-robust (sandwich, clustered by
question) variance of the two-stage estimator with the delta method, on the logit scale for
rates; see docs/STATISTICS.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from analysis.stats import Z95, wilson

LAMBDAS = (0.1, 1.0, 10.0)
FOLDS = 3
THETA_FACTOR = 0.01
# Newton-CG stops when the mean step is below this: far below the 1e-6 the win rates promise.
XTOL = 1e-10


@dataclass
class LCResult:
    groups: list[str]
    control: str
    lam: float
    length_scale: float
    length_slope: float  # φ, per unit of t
    lc_winrate: dict[str, float] = field(default_factory=dict)
    raw_winrate: dict[str, float] = field(default_factory=dict)
    theta: dict[str, float] = field(default_factory=dict)
    psi: dict[str, float] = field(default_factory=dict)
    # 95% intervals and the number of questions (clusters) behind each group's figures.
    lc_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    raw_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    lc_effect: dict[str, float] = field(default_factory=dict)
    lc_effect_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    raw_effect: dict[str, float] = field(default_factory=dict)
    raw_effect_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    n_questions: dict[str, int] = field(default_factory=dict)


@dataclass
class Items:
    """The items of one judge, coded: group index g, question index q (0..n_q-1), t, y, w, and
    the orientation o (±1, 0) of each item's competitor against the control's A2."""

    g: np.ndarray
    q: np.ndarray
    t: np.ndarray
    y: np.ndarray
    w: np.ndarray
    o: np.ndarray
    n_g: int
    n_q: int
    control: int  # index of the control group

    def take(self, mask: np.ndarray) -> Items:
        d = self
        return Items(d.g[mask], d.q[mask], d.t[mask], d.y[mask], d.w[mask], d.o[mask], d.n_g, d.n_q, d.control)

    @property
    def is_control(self) -> np.ndarray:
        return self.g == self.control


def _loss(w, y, eta) -> np.ndarray:
    """Binomial log loss with fractional outcomes; logaddexp keeps it finite for large |eta|."""
    return w * (np.logaddexp(0.0, eta) - y * eta)


def _newton(fun, hessp, n: int) -> np.ndarray:
    """scipy's Newton-CG from zero (a start that is its own mirror) to the unique optimum."""
    return minimize(fun, np.zeros(n), jac=True, hessp=hessp, method="Newton-CG", options={"xtol": XTOL}).x


# Stage 1: the control items. x = [θ_c, φ, γ_0 .. γ_{n_q-1}] (questions without a control item
# keep γ = 0: only the penalty acts on them).


def stage1_objective(x: np.ndarray, d: Items, lam: float) -> tuple[float, np.ndarray]:
    """Penalised loss of the control items ``d`` and its gradient."""
    theta, phi, gamma = x[0], x[1], x[2:]
    eta = theta + phi * d.t + gamma[d.q]
    r = d.w * (expit(eta) - d.y)
    value = _loss(d.w, d.y, eta).sum() + lam * (THETA_FACTOR * theta * theta + phi * phi + gamma @ gamma)
    grad = np.concatenate(
        [
            [r.sum() + 2 * lam * THETA_FACTOR * theta, r @ d.t + 2 * lam * phi],
            np.bincount(d.q, weights=r, minlength=d.n_q) + 2 * lam * gamma,
        ]
    )
    return float(value), grad


def _stage1_hessp(x: np.ndarray, v: np.ndarray, d: Items, lam: float) -> np.ndarray:
    p = expit(x[0] + x[1] * d.t + x[2:][d.q])
    jv = d.w * p * (1 - p) * (v[0] + v[1] * d.t + v[2:][d.q])
    return np.concatenate(
        [
            [jv.sum() + 2 * lam * THETA_FACTOR * v[0], jv @ d.t + 2 * lam * v[1]],
            np.bincount(d.q, weights=jv, minlength=d.n_q) + 2 * lam * v[2:],
        ]
    )


def fit_stage1(d: Items, lam: float) -> np.ndarray:
    """[θ_c, φ, γ...] from the control items of ``d``."""
    c = d.take(d.is_control)
    return _newton(lambda x: stage1_objective(x, c, lam), lambda x, v: _stage1_hessp(x, v, c, lam), 2 + d.n_q)


# Stage 2: the perturbation groups, with the offset φ·t and the covariate z = o·γ_q fixed.
# x = [θ_g, ψ_g] per group (n_g rows of 2; the control's row stays zero and unused).


def _stage2_eta(b: np.ndarray, d: Items, offset: np.ndarray, z: np.ndarray) -> np.ndarray:
    return b[d.g, 0] + offset + b[d.g, 1] * z


def _penalty(lam: float) -> np.ndarray:
    return lam * np.array([THETA_FACTOR, 1.0])


def stage2_objective(x: np.ndarray, d: Items, offset: np.ndarray, z: np.ndarray, lam: float):
    """Penalised loss of the perturbation items ``d`` (offset φ·t, covariate z) and its gradient."""
    b = x.reshape(d.n_g, 2)
    eta = _stage2_eta(b, d, offset, z)
    r = d.w * (expit(eta) - d.y)
    grad = np.stack([np.bincount(d.g, weights=r, minlength=d.n_g), np.bincount(d.g, weights=r * z, minlength=d.n_g)], 1)
    pen = _penalty(lam)
    return float(_loss(d.w, d.y, eta).sum() + (pen * b * b).sum()), (grad + 2 * pen * b).ravel()


def _stage2_hessp(x, v, d: Items, offset, z, lam) -> np.ndarray:
    b, vb = x.reshape(d.n_g, 2), v.reshape(d.n_g, 2)
    p = expit(_stage2_eta(b, d, offset, z))
    jv = d.w * p * (1 - p) * (vb[d.g, 0] + vb[d.g, 1] * z)
    out = np.stack(
        [np.bincount(d.g, weights=jv, minlength=d.n_g), np.bincount(d.g, weights=jv * z, minlength=d.n_g)], 1
    )
    return (out + 2 * _penalty(lam) * vb).ravel()


def fit_stage2(d: Items, phi: float, z: np.ndarray, lam: float) -> np.ndarray:
    """(n_g, 2) array of θ_g, ψ_g for the perturbation groups of ``d`` (the control's row 0)."""
    keep = ~d.is_control
    p, offset, zp = d.take(keep), phi * d.t[keep], z[keep]
    x = _newton(
        lambda x: stage2_objective(x, p, offset, zp, lam),
        lambda x, v: _stage2_hessp(x, v, p, offset, zp, lam),
        2 * d.n_g,
    )
    return x.reshape(d.n_g, 2)


def question_folds(questions: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold number of each row: questions are dealt to folds in a seeded random order, so all
    items of a question share a fold and fold sizes differ by at most one question."""
    uniq, q = np.unique(questions, return_inverse=True)
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of_question = np.empty(len(uniq), dtype=np.int64)
    fold_of_question[order] = np.arange(len(uniq)) % folds
    return fold_of_question[q]


def choose_lambda(d: Items, lambdas: tuple[float, ...], folds: int, seed: int) -> tuple[float, list[float]]:
    """The λ with the least held-out log loss of the perturbation groups' items, folds grouped
    by question, and the loss of each λ (sorted from the largest λ; ties go to the larger,
    simpler one). The middle λ, without losses, when there is nothing to hold out."""
    lambdas = tuple(sorted(lambdas, reverse=True))
    perturbed = ~d.is_control
    if len(lambdas) == 1 or len(np.unique(d.q[perturbed])) < folds:
        return float(lambdas[len(lambdas) // 2]), []
    fold = question_folds(d.q, folds, seed)
    losses = []
    for lam in lambdas:
        x1 = fit_stage1(d, lam)
        z = d.o * x1[2:][d.q]
        total = 0.0
        for k in range(folds):
            train, test = fold != k, (fold == k) & perturbed
            b = fit_stage2(d.take(train), x1[1], z[train], lam)
            held = d.take(test)
            total += float(_loss(held.w, held.y, _stage2_eta(b, held, x1[1] * held.t, z[test])).sum())
        losses.append(total)
    return float(lambdas[int(np.argmin(losses))]), losses


def items(
    groups: np.ndarray,
    questions: np.ndarray,
    delta_len: np.ndarray,
    y: np.ndarray,
    weight: np.ndarray,
    *,
    orientation: np.ndarray | None = None,
    control: str = "control",
) -> tuple[Items, list[str], float] | None:
    """The coded items (rows without votes or length left out), the group names and the
    length scale; None without any control item to measure the length preference on."""
    delta_len, weight = np.asarray(delta_len, dtype=float), np.asarray(weight, dtype=float)
    groups = np.asarray(groups).astype(str)
    keep = (weight > 0) & ~np.isnan(delta_len)
    if not (keep & (groups == control)).any():
        return None
    orientation = np.ones(len(weight)) if orientation is None else np.asarray(orientation, dtype=float)
    names, g = np.unique(groups[keep], return_inverse=True)
    _, q = np.unique(np.asarray(questions)[keep], return_inverse=True)
    delta_len = delta_len[keep]
    # Root mean square, not the standard deviation: it does not change when one group's
    # differences change sign, which the swap property needs.
    scale = float(np.sqrt(np.mean(delta_len * delta_len)))
    c = int(np.flatnonzero(names == control)[0])
    d = Items(
        g=g,
        q=q,
        t=np.tanh(delta_len / scale) if scale > 0 else np.zeros_like(delta_len),
        y=np.asarray(y, dtype=float)[keep],
        w=weight[keep],
        o=np.where(g == c, 1.0, orientation[keep]),
        n_g=len(names),
        n_q=int(q.max()) + 1,
        control=c,
    )
    return d, [str(n) for n in names], scale


def fit(
    groups: np.ndarray,
    questions: np.ndarray,
    delta_len: np.ndarray,
    y: np.ndarray,
    weight: np.ndarray,
    *,
    orientation: np.ndarray | None = None,
    control: str = "control",
    lambdas: tuple[float, ...] = LAMBDAS,
    folds: int = FOLDS,
    seed: int = 0,
) -> LCResult | None:
    """Fit the model on items (one row each). ``y`` is the share of the competitor's wins with
    ties as half; ``weight`` the number of votes; ``orientation`` +1 where the item's competitor
    is the control's A2 or made from it, −1 where it is the control's A1 or made from it, 0 when
    unknown (default +1 everywhere). None when no control item has votes."""
    coded = items(groups, questions, delta_len, y, weight, orientation=orientation, control=control)
    if coded is None:
        return None
    d, names, scale = coded
    lam, _ = choose_lambda(d, lambdas, folds, seed)
    x1 = fit_stage1(d, lam)
    z = d.o * x1[2:][d.q]
    b = fit_stage2(d, x1[1], z, lam)
    return _result(d, names, x1, b, z, lam, scale)


def _result(d: Items, names: list[str], x1, b, z, lam: float, scale: float) -> LCResult:
    theta_c, phi, gamma = x1[0], x1[1], x1[2:]
    is_c = d.is_control
    eta0 = np.where(is_c, theta_c + gamma[d.q], b[d.g, 0] + b[d.g, 1] * z)  # the prediction at Δlen = 0
    infl = _Influence(d, x1, b, z, eta0 + phi * d.t, lam)
    res = LCResult(groups=names, control=names[d.control], lam=lam, length_scale=scale, length_slope=float(phi))
    lc_if, raw_if = {}, {}
    for j, name in enumerate(names):
        rows = d.g == j
        n_q = len(np.unique(d.q[rows]))
        res.n_questions[name] = n_q
        res.lc_winrate[name], lc_if[name] = infl.winrate(rows, eta0)
        res.raw_winrate[name], raw_if[name] = infl.ratio(rows, d.w * d.y, d.w)
        res.lc_ci[name] = _rate_ci(res.lc_winrate[name], lc_if[name], n_q)
        res.raw_ci[name] = _rate_ci(res.raw_winrate[name], raw_if[name], n_q)
        res.theta[name] = float(theta_c if j == d.control else b[j, 0])
        res.psi[name] = float(1.0 if j == d.control else b[j, 1])
    c = res.control
    for name in names:
        if name == c:
            continue
        for value, ci, rate, inf in (
            (res.lc_effect, res.lc_effect_ci, res.lc_winrate, lc_if),
            (res.raw_effect, res.raw_effect_ci, res.raw_winrate, raw_if),
        ):
            value[name] = rate[name] - rate[c]
            ci[name] = _effect_ci(
                value[name], inf[name] - inf[c], (rate[name], res.n_questions[name]), (rate[c], res.n_questions[c])
            )
    return res


def _sd(influence: np.ndarray) -> float:
    """Cluster-robust standard deviation from per-question influence values, with the usual
    n/(n − 1) small-sample factor."""
    n = len(influence)
    if n < 2:
        return 0.0
    centred = influence - influence.mean()
    return float(np.sqrt(centred @ centred * n / (n - 1)))


def _rate_ci(value: float, influence: np.ndarray, n_questions: int) -> tuple[float, float]:
    """Wald interval on the logit scale (so it stays inside (0, 1)); a Wilson score interval
    over the questions when the variance is zero (every question alike), so it never
    collapses to a point."""
    sd = _sd(influence)
    if sd > 0 and 0 < value < 1:
        half = Z95 * sd / (value * (1 - value))
        logit = np.log(value / (1 - value))
        return float(expit(logit - half)), float(expit(logit + half))
    lo, hi = wilson(value * n_questions, n_questions)
    return float(lo), float(hi)


def _effect_ci(value: float, influence: np.ndarray, a: tuple[float, int], b: tuple[float, int]):
    """Wald interval of a difference of two rates; Newcombe's hybrid of the two Wilson
    intervals when the variance is zero."""
    sd = _sd(influence)
    if sd > 0:
        return max(-1.0, value - Z95 * sd), min(1.0, value + Z95 * sd)
    (p1, n1), (p2, n2) = a, b
    l1, u1 = wilson(p1 * n1, n1)
    l2, u2 = wilson(p2 * n2, n2)
    return float(value - np.hypot(p1 - l1, u2 - p2)), float(value + np.hypot(u1 - p1, p2 - l2))


class _Influence:
    """Per-question influence of each figure on the two-stage fit: the sandwich of the stacked
    M-estimator, clustered by question.

    The parameters β = (θ_c, φ, γ; θ_g, ψ_g) solve the stacked penalised score equations
    Σ_q u_q(β) = 0, where u_q is question q's share: its items' scores, its own γ_q's penalty
    and 1/n_q of the shared penalties. For a figure R = Σ_q a_q / Σ_q n_q over a group's items,
    the influence of question q is (a_q − R n_q)/N − vᵀu_q with v = A⁻ᵀ ∂R/∂β, A the Jacobian
    of the stacked scores. A is block lower triangular (stage 1 does not depend on stage 2), so
    v takes two solves: the 2 × 2 block of each group in stage 2, then the arrow-shaped stage 1
    (a 2 × 2 block for θ_c, φ and a diagonal for γ) through its Schur complement.
    """

    def __init__(self, d: Items, x1: np.ndarray, b: np.ndarray, z: np.ndarray, eta: np.ndarray, lam: float):
        self.d, self.b, self.z = d, b, z
        p = expit(eta)
        self.r, self.s = d.w * (p - d.y), d.w * p * (1 - p)
        n_q, c, pr = d.n_q, d.is_control, ~d.is_control
        theta_c, phi, gamma = x1[0], x1[1], x1[2:]
        # Stage 1 Hessian [[D, C], [Cᵀ, diag(h)]] and per-question scores.
        sc, tc, qc, rc = self.s[c], d.t[c], d.q[c], self.r[c]
        self.D = np.array([[sc.sum() + 2 * lam * THETA_FACTOR, sc @ tc], [sc @ tc, sc @ (tc * tc) + 2 * lam]])
        self.C = np.stack([np.bincount(qc, weights=sc, minlength=n_q), np.bincount(qc, weights=sc * tc, minlength=n_q)])
        self.h = self.C[0] + 2 * lam
        self.u1 = np.stack(
            [
                np.bincount(qc, weights=rc, minlength=n_q) + 2 * lam * THETA_FACTOR * theta_c / n_q,
                np.bincount(qc, weights=rc * tc, minlength=n_q) + 2 * lam * phi / n_q,
                np.bincount(qc, weights=rc, minlength=n_q) + 2 * lam * gamma,
            ]
        )
        # Stage 2: the design (1, z) of the perturbation items, a 2 × 2 Hessian per group and
        # the per-question scores (questions × groups × 2).
        self.X = np.stack([np.ones(len(d.y)), z], axis=1)
        pen = _penalty(lam)
        self.H2 = np.array(
            [(self.X[rows] * self.s[rows, None]).T @ self.X[rows] for rows in (pr & (d.g == j) for j in range(d.n_g))]
        )
        self.H2 += 2 * np.diag(pen)
        cell = d.q[pr] * d.n_g + d.g[pr]
        self.u2 = np.stack(
            [np.bincount(cell, weights=self.r[pr] * self.X[pr, k], minlength=n_q * d.n_g) for k in range(2)], axis=1
        ).reshape(n_q, d.n_g, 2)
        self.u2 += 2 * pen * b / n_q

    def ratio(self, rows: np.ndarray, num: np.ndarray, den: np.ndarray) -> tuple[float, np.ndarray]:
        """Σ num / Σ den over ``rows``, a figure without fitted parameters, with its influence."""
        q, n_q = self.d.q[rows], self.d.n_q
        a = np.bincount(q, weights=num[rows], minlength=n_q)
        n = np.bincount(q, weights=den[rows], minlength=n_q)
        value = a.sum() / n.sum()
        return float(value), (a - value * n) / n.sum()

    def winrate(self, rows: np.ndarray, eta0: np.ndarray) -> tuple[float, np.ndarray]:
        """The mean of logistic(eta0) over ``rows`` (one group's items), with its influence."""
        d = self.d
        value, direct = self.ratio(rows, expit(eta0), np.ones(len(eta0)))
        p0 = expit(eta0[rows])
        dp = p0 * (1 - p0) / rows.sum()  # ∂R/∂eta0 of each item
        q, j = d.q[rows], int(d.g[rows][0])
        grad1 = np.zeros(2 + d.n_q)  # ∂R/∂(θ_c, φ, γ)
        grad2 = np.zeros((d.n_g, 2))  # ∂R/∂(θ_g, ψ_g)
        if j == d.control:
            grad1[0] = dp.sum()
            grad1[2:] = np.bincount(q, weights=dp, minlength=d.n_q)
        else:
            grad2[j] = [dp.sum(), dp @ self.z[rows]]
            grad1[2:] = np.bincount(q, weights=dp * self.b[j, 1] * d.o[rows], minlength=d.n_q)
        return value, direct - self._sensitivity(grad1, grad2)

    def _sensitivity(self, grad1: np.ndarray, grad2: np.ndarray) -> np.ndarray:
        """vᵀu_q for every question q, with v = A⁻ᵀ (grad1, grad2)."""
        d, pr = self.d, ~self.d.is_control
        v2 = np.array([np.linalg.solve(h, g) for h, g in zip(self.H2, grad2, strict=True)])
        # Stage 2 depends on φ (the offset φ·t) and on γ (through z = o·γ in η and in the
        # design): rhs = grad1 − H21ᵀ v2.
        gp = d.g[pr]
        xv = np.einsum("ik,ik->i", self.X[pr], v2[gp])
        rhs = grad1.copy()
        rhs[1] -= np.sum(self.s[pr] * d.t[pr] * xv)
        dz = self.s[pr] * self.b[gp, 1] * xv + self.r[pr] * v2[gp, 1]
        rhs[2:] -= np.bincount(d.q[pr], weights=dz * d.o[pr], minlength=d.n_q)
        # The stage 1 block: arrow-shaped, solved through the Schur complement of diag(h).
        e, f = rhs[:2], rhs[2:]
        top = np.linalg.solve(self.D - (self.C / self.h) @ self.C.T, e - self.C @ (f / self.h))
        v_gamma = (f - self.C.T @ top) / self.h
        return top @ self.u1[:2] + v_gamma * self.u1[2] + np.einsum("qgk,gk->q", self.u2, v2)
