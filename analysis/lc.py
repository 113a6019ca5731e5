"""Length-controlled win rates after Dubois et al. 2024 (Length-Controlled AlpacaEval).

For one judge, each item is a game between the baseline A1 and a competitor (the group's A2 or
A2p); y is the judge's preference for the competitor (votes for it + half the ties, over all
votes), weighted by the number of votes. The model is

    logit P(competitor) = θ_g + φ · t + ψ_g · z,      t = tanh(Δlen / rms(Δlen))

fitted in two stages, as AlpacaEval fixes the instruction difficulty before fitting the rest.
Each stage is a strictly convex penalised logistic regression with one optimum, found by
Newton's method with the exact Hessian (``GLM.fit``):

1. **The control items alone** (A1 vs A2, the baseline comparison of each question): a
   regression on (1, t) gives θ_c and the judge's length slope φ. Then γ_q, the question's
   difficulty, is its control log-odds (Haldane-Anscombe: ½ added to each side) minus what
   θ_c + φ·t predicts for it: how much this judge prefers the question's A2 over its A1 with
   length taken out. The slope is measured here because only here do the two answers differ
   in length independently of any perturbation: a perturbation such as rich content lengthens
   almost every answer by a similar amount, so within its group a slope cannot be told apart
   from the group term, and a fitted one extrapolates to Δlen = 0 from far away.
2. **The perturbation groups**, with φ and γ fixed: a regression on (1, z) with offset φ·t,
   where z = ±γ_q is oriented to the item: + when its competitor was made from the control's
   A2, − when made from the control's A1, 0 when the question has no control item.

Penalties: λ on φ and ψ; ``THETA_FACTOR`` λ on θ (only to keep it finite when a group is
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
same way, and the other groups absorb the sign of γ by ψ_g → −ψ_g (or by their orientation,
which flips with the control's sides), so their rates stay. A group
whose two sides are exchangeable is its own mirror and gets exactly 1/2.

Each rate and effect carries a 95% interval from a cluster-robust (sandwich, clustered by
question) variance of the two-stage estimator with the delta method, on the logit scale for
rates; see docs/STATISTICS.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from analysis.stats import Z95, wilson

LAMBDAS = (0.1, 1.0, 10.0)
FOLDS = 3
THETA_FACTOR = 0.01
CV_MAX_QUESTIONS = 500
# Newton's method stops when the gradient's norm is below this: parameters then sit within
# ~GTOL / curvature of the optimum, far below the 1e-6 the win rates promise. From zero it
# takes a handful of steps; MAX_STEPS only bounds a pathological case.
GTOL = 1e-8
STEP_TOL = 1e-9
MAX_STEPS = 100


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


# Both stages fit a penalised logistic regression with one coefficient row per group:
# η = offset + Σ_k b[g, k] · X[:, k], penalty Σ_k pen_k · b[·, k]².


class GLM:
    """One such problem: ``objective`` (loss and gradient) and the Hessian's ``blocks``, sharing
    the fitted probabilities of the last point (a Newton step asks for both at each point)."""

    def __init__(self, X, g, n_g: int, offset, y, w, pen):
        self.X, self.g, self.n_g, self.offset, self.y, self.w, self.pen = X, g, n_g, offset, y, w, pen
        self._at: np.ndarray | None = None

    def _eta_p(self, x: np.ndarray):
        if self._at is None or not np.array_equal(x, self._at):
            b = x.reshape(self.n_g, -1)
            eta = self.offset + sum(b[self.g, k] * self.X[:, k] for k in range(self.X.shape[1]))
            self._at, self._eta, self._p = x.copy(), eta, expit(eta)
        return self._eta, self._p

    def objective(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        b = x.reshape(self.n_g, -1)
        eta, p = self._eta_p(x)
        r = self.w * (p - self.y)
        grad = np.stack([np.bincount(self.g, weights=r * col, minlength=self.n_g) for col in self.X.T], axis=1)
        value = _loss(self.w, self.y, eta).sum() + (self.pen * b * b).sum()
        return float(value), (grad + 2 * self.pen * b).ravel()

    def blocks(self, x: np.ndarray) -> np.ndarray:
        """The Hessian's diagonal blocks (n_g × k × k), one per group."""
        _, p = self._eta_p(x)
        return _glm_blocks(self.w * p * (1 - p), self.X, self.g, self.n_g, self.pen)

    def hessian(self, x: np.ndarray) -> np.ndarray:
        """The whole Hessian (for scipy's optimisers, which the tests compare against)."""
        blocks = self.blocks(x)
        k = blocks.shape[1]
        out = np.zeros((self.n_g * k, self.n_g * k))
        for j, block in enumerate(blocks):
            out[j * k : (j + 1) * k, j * k : (j + 1) * k] = block
        return out

    def fit(self) -> np.ndarray:
        """The unique minimiser (n_g × X's columns), by Newton's method with the exact Hessian
        from zero (a start that is its own mirror), halving a step until the loss does not rise.
        The Hessian is block-diagonal (a group's coefficients meet only its own rows), so each
        step solves one small system per group. Plain Newton, not scipy's trust-region method:
        on these two-parameter problems scipy's machinery around each step cost more than the
        steps (a fifth of a million-vote report)."""
        k = self.X.shape[1]
        x = np.zeros(self.n_g * k)
        if not len(self.y):
            # No items (a study without perturbations has none in the second stage): the
            # penalty alone, whose minimiser is the start.
            return x.reshape(self.n_g, k)
        value, grad = self.objective(x)
        for _ in range(MAX_STEPS):
            if np.linalg.norm(grad) < GTOL:
                break
            step = np.linalg.solve(self.blocks(x), grad.reshape(self.n_g, k, 1)).ravel()
            scale = 1.0
            while (new := self.objective(x - scale * step))[0] > value:
                scale /= 2
                if scale < 1e-10:  # no decrease along Newton's direction: at the optimum
                    return x.reshape(self.n_g, k)
            x, (value, grad) = x - scale * step, new
            # With many votes the summed loss's gradient cannot always reach GTOL in floating
            # point; a step this small means the optimum is reached to far better than 1e-6.
            if scale * np.max(np.abs(step)) < STEP_TOL:
                break
        return x.reshape(self.n_g, k)


def _glm_blocks(s, X, g, n_g: int, pen) -> np.ndarray:
    """The Hessian's diagonal blocks, one per group: Σ s·x·xᵀ + 2·diag(pen)."""
    k = X.shape[1]
    out = np.zeros((n_g, k, k))
    for a in range(k):
        for c in range(a, k):
            out[:, a, c] = out[:, c, a] = np.bincount(g, weights=s * X[:, a] * X[:, c], minlength=n_g)
    return out + 2 * np.diag(pen)


def _penalty(lam: float) -> np.ndarray:
    """Penalty weights of (intercept, slope): θ gets ``THETA_FACTOR`` λ, the slope λ."""
    return lam * np.array([THETA_FACTOR, 1.0])


@dataclass
class Stage1:
    theta: float  # θ_c
    phi: float  # the judge's length slope
    gamma: np.ndarray  # γ_q per question (0 where the question has no control item)
    tbar: np.ndarray  # the control's mean t per question
    has: np.ndarray  # whether the question has a control item


def fit_stage1(d: Items, lam: float) -> Stage1:
    """θ_c and φ from the control items (a penalised logistic regression on t), then each
    question's γ_q: its control log-odds, with ½ added to each side (Haldane-Anscombe), minus
    what θ_c + φ·t predicts for it."""
    c = d.take(d.is_control)
    X = np.stack([np.ones(len(c.y)), c.t], axis=1)
    (theta, phi) = GLM(X, np.zeros(len(c.y), dtype=np.int64), 1, 0.0, c.y, c.w, _penalty(lam)).fit()[0]
    wins = np.bincount(c.q, weights=c.w * c.y, minlength=d.n_q)
    votes = np.bincount(c.q, weights=c.w, minlength=d.n_q)
    has = votes > 0
    logit = np.log((wins + 0.5) / (votes - wins + 0.5))
    tbar = np.bincount(c.q, weights=c.w * c.t, minlength=d.n_q) / np.where(has, votes, 1)
    gamma = np.where(has, logit - theta - phi * tbar, 0.0)
    return Stage1(float(theta), float(phi), gamma, tbar, has)


def fit_stage2(d: Items, s1: Stage1, lam: float) -> np.ndarray:
    """(n_g, 2): θ_g, ψ_g of the perturbation groups (the control's row is zero), with the
    offset φ·t and the covariate z = o·γ_q fixed."""
    return stage2_problem(d, s1, lam).fit()


def stage2_problem(d: Items, s1: Stage1, lam: float) -> GLM:
    """The second stage's problem: the perturbation items with the offset φ·t and the
    covariate z = o·γ_q fixed, coefficients (θ_g, ψ_g) for every group."""
    p = d.take(~d.is_control)
    X = np.stack([np.ones(len(p.y)), p.o * s1.gamma[p.q]], axis=1)
    return GLM(X, p.g, d.n_g, s1.phi * p.t, p.y, p.w, _penalty(lam))


def stage2_eta(b: np.ndarray, d: Items, s1: Stage1) -> np.ndarray:
    return b[d.g, 0] + s1.phi * d.t + b[d.g, 1] * d.o * s1.gamma[d.q]


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
    by question, and the loss of each λ (from the largest λ; ties go to the larger, simpler
    one). The middle λ, without losses, when there is nothing to hold out. On at most
    ``CV_MAX_QUESTIONS`` questions (a seeded choice): the penalty matters in small studies,
    in big ones the data outweigh it."""
    lambdas = tuple(sorted(lambdas, reverse=True))
    uniq = np.unique(d.q[~d.is_control])
    if len(lambdas) == 1 or len(uniq) < folds:
        return float(lambdas[len(lambdas) // 2]), []
    if len(uniq) > CV_MAX_QUESTIONS:
        d = d.take(np.isin(d.q, np.random.default_rng(seed).choice(uniq, CV_MAX_QUESTIONS, replace=False)))
    fold = question_folds(d.q, folds, seed)
    losses = []
    for lam in lambdas:
        s1 = fit_stage1(d, lam)
        total = 0.0
        for k in range(folds):
            b = fit_stage2(d.take(fold != k), s1, lam)
            held = d.take((fold == k) & ~d.is_control)
            total += float(_loss(held.w, held.y, stage2_eta(b, held, s1)).sum())
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
    g, names = pd.factorize(groups[keep], sort=True)
    q, question_ids = pd.factorize(np.asarray(questions)[keep], sort=True)
    delta_len = delta_len[keep]
    # Root mean square, not the standard deviation: it does not change when one group's
    # differences change sign, which the swap property needs.
    scale = float(np.sqrt(np.mean(delta_len * delta_len)))
    c = int(np.flatnonzero(np.asarray(names) == control)[0])
    d = Items(
        g=g,
        q=q,
        t=np.tanh(delta_len / scale) if scale > 0 else np.zeros_like(delta_len),
        y=np.asarray(y, dtype=float)[keep],
        w=weight[keep],
        o=np.where(g == c, 1.0, orientation[keep]),
        n_g=len(names),
        n_q=len(question_ids),
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
    s1 = fit_stage1(d, lam)
    return _result(d, names, s1, fit_stage2(d, s1, lam), lam, scale)


def _result(d: Items, names: list[str], s1: Stage1, b: np.ndarray, lam: float, scale: float) -> LCResult:
    is_c = d.is_control
    # The prediction at Δlen = 0.
    eta0 = np.where(is_c, s1.theta + s1.gamma[d.q], b[d.g, 0] + b[d.g, 1] * d.o * s1.gamma[d.q])
    # The fitted log-odds of each stage's model (the control's first stage has no γ).
    eta = np.where(is_c, s1.theta + s1.phi * d.t, stage2_eta(b, d, s1))
    infl = _Influence(d, s1, b, eta, lam)
    res = LCResult(groups=names, control=names[d.control], lam=lam, length_scale=scale, length_slope=s1.phi)
    lc_if, raw_if = {}, {}
    for j, name in enumerate(names):
        rows = d.g == j
        n_q = len(np.unique(d.q[rows]))
        res.n_questions[name] = n_q
        res.lc_winrate[name], lc_if[name] = infl.winrate(rows, eta0)
        res.raw_winrate[name], raw_if[name] = infl.ratio(rows, d.w * d.y, d.w)
        res.lc_ci[name] = _rate_ci(res.lc_winrate[name], lc_if[name], n_q)
        res.raw_ci[name] = _rate_ci(res.raw_winrate[name], raw_if[name], n_q)
        res.theta[name] = float(s1.theta if j == d.control else b[j, 0])
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

    The parameters β = (a = (θ_c, φ); γ; b = (θ_g, ψ_g)) solve stacked estimating equations
    Σ_q u_q(β) = 0: the control's penalised scores for a (each question its items' scores and
    1/n_q of the penalty), γ_q − (logit_q − θ_c − φ·t̄_q) = 0 for each γ_q (zero at the
    estimate), and the perturbation items' penalised scores for b. For a figure
    R = Σ_q a_q / Σ_q n_q over a group's items, the influence of question q is
    (a_q − R n_q)/N − vᵀu_q with v = A⁻ᵀ ∂R/∂β, A the Jacobian of the stacked equations. A is
    block lower triangular (a, then γ given a, then b given both), so v takes one small solve
    per block, backwards: each group's 2 × 2 block of b, the identity of γ, the 2 × 2 of a.
    """

    def __init__(self, d: Items, s1: Stage1, b: np.ndarray, eta: np.ndarray, lam: float):
        self.d, self.s1, self.b = d, s1, b
        p = expit(eta)
        self.r, self.s = d.w * (p - d.y), d.w * p * (1 - p)
        n_q, c, pr = d.n_q, d.is_control, ~d.is_control
        pen = _penalty(lam)
        # Stage 1: the control's design (1, t), its Hessian and per-question scores (n_q × 2).
        xc, qc = np.stack([np.ones(c.sum()), d.t[c]], axis=1), d.q[c]
        self.D = _glm_blocks(self.s[c], xc, np.zeros(len(qc), dtype=np.int64), 1, pen)[0]
        a = np.array([s1.theta, s1.phi])
        self.u1 = np.stack([np.bincount(qc, weights=self.r[c] * xc[:, k], minlength=n_q) for k in range(2)], 1)
        self.u1 += 2 * pen * a / n_q
        # Stage 2: the design (1, z) of the perturbation items, each group's Hessian block and
        # the per-question scores (n_q × groups × 2).
        self.pr, self.gp, self.qp = pr, d.g[pr], d.q[pr]
        self.X = np.stack([np.ones(pr.sum()), d.o[pr] * s1.gamma[self.qp]], axis=1)
        self.H2 = _glm_blocks(self.s[pr], self.X, self.gp, d.n_g, pen)
        cell = self.qp * d.n_g + self.gp
        u2 = [np.bincount(cell, weights=self.r[pr] * self.X[:, k], minlength=n_q * d.n_g) for k in range(2)]
        self.u2 = np.stack(u2, axis=1).astype(float).reshape(n_q, d.n_g, 2) + 2 * pen * b / n_q

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
        grad_a, grad_b = np.zeros(2), np.zeros((d.n_g, 2))
        if j == d.control:
            grad_a[0] = dp.sum()
            grad_gamma = np.bincount(q, weights=dp, minlength=d.n_q)
        else:
            grad_b[j] = [dp.sum(), dp @ (d.o[rows] * self.s1.gamma[q])]
            grad_gamma = np.bincount(q, weights=dp * self.b[j, 1] * d.o[rows], minlength=d.n_q)
        return value, direct - self._sensitivity(grad_a, grad_gamma, grad_b)

    def _sensitivity(self, grad_a: np.ndarray, grad_gamma: np.ndarray, grad_b: np.ndarray) -> np.ndarray:
        """vᵀu_q for every question q, with v = A⁻ᵀ ∂R/∂β (the u_q of γ are zero)."""
        d, s1, pr, gp = self.d, self.s1, self.pr, self.gp
        v_b = np.array([np.linalg.solve(h, g) for h, g in zip(self.H2, grad_b, strict=True)])
        # b's equations depend on γ (through z = o·γ in η and in the design) and on φ (the
        # offset φ·t): take their part out of γ's and a's right-hand sides.
        xv = np.einsum("ik,ik->i", self.X, v_b[gp])
        dz = self.s[pr] * self.b[gp, 1] * xv + self.r[pr] * v_b[gp, 1]
        v_gamma = grad_gamma - np.bincount(self.qp, weights=dz * d.o[pr], minlength=d.n_q)
        # γ_q's equation depends on θ_c and φ with coefficients 1 and t̄_q.
        rhs = grad_a - np.array([v_gamma @ s1.has, v_gamma @ (s1.has * s1.tbar)])
        rhs[1] -= np.sum(self.s[pr] * d.t[pr] * xv)
        v_a = np.linalg.solve(self.D, rhs)
        return self.u1 @ v_a + np.einsum("qgk,gk->q", self.u2, v_b)
