"""Length-controlled win rates after Dubois et al. 2024 (Length-Controlled AlpacaEval).

For one judge, each item is a game between the baseline A1 and a competitor (the control's A2,
or a perturbation group's A2p); y is the judge's preference for the competitor (votes for it +
half the ties, over all votes), weighted by the number of votes. One model is fitted to all of
the judge's items at once:

    logit P(competitor) = θ_g + φ · t + o · γ_q,      t = tanh(Δlen / scale)

- θ_g, one per group (the control is a group like the others);
- φ, the judge's length slope, one per judge;
- γ_q, how much this judge prefers question q's A2 over its A1 (its difficulty), shared by
  all the question's items and oriented per item: o = +1 when the item's competitor is (or was
  made from) the control's A2, −1 when from the control's A1, 0 when that is unknown;
- scale, the pooled within-group standard deviation of Δlen: a group whose competitor is
  always much longer does not inflate it, and it does not change when a group's sides swap.

The fit minimises the log loss (ties as half a win, votes as weights) plus λ Σ γ_q² and a
small fixed ``FIXED_PENALTY`` on θ and φ, which only keeps them finite when a judge always
picks one side or always the longer answer. λ is chosen by K-fold cross-validation with folds
grouped by question: the perturbation items of a fold's questions are held out, their
questions' control items stay in (they tell the fit the held-out questions' γ_q), and the
criterion is the held-out log loss. The problem is strictly convex: one optimum, found by
Newton's method with the exact Hessian from zero.

The length-controlled win rate of g is the vote-weighted mean over its items of
logistic(θ_g + o · γ_q): the model's prediction with Δlen = 0. Why it equals the raw rate when
the judge has no length preference: θ_g's score equation, Σ_g w (p − y) = −2 ``FIXED_PENALTY``
θ_g ≈ 0, makes the vote-weighted mean of g's fitted predictions its raw rate, and with φ = 0
the fitted predictions are the Δlen = 0 ones. (The estimator this replaced averaged each
question's own half-corrected control log-odds, which pulls towards 50%: 10% raw became 30%
at one vote per item.)

Why the win-rate properties hold exactly. Swapping the two sides of group g maps its rows
(y, t, o) → (1 − y, −t, −o), and leaves the scale alone; θ_g → −θ_g, everything else kept, then
gives the same loss and penalty. The optimum being unique, it is that mirror: g's rate becomes
1 − x and the others stay. Swapping the control's sides also flips the other groups'
orientation, and the mirror is θ_c → −θ_c, γ → −γ. A group whose two sides are exchangeable is
its own mirror and gets exactly 1/2.

Each rate and effect carries a 95% interval from a cluster-robust (sandwich, clustered by
question) variance with the delta method, on the logit scale for rates; see
docs/STATISTICS.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from analysis.stats import Z95, wilson

# The candidate penalties λ on the question terms γ_q (λ γ² is a normal prior of variance
# 1 / 2λ: sd 2.2 to 0.2 on the logit scale).
LAMBDAS = (0.1, 0.3, 1.0, 3.0, 10.0)
FOLDS = 3
FIXED_PENALTY = 0.01
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
    lam: float  # the penalty on the question terms, chosen by cross-validation
    length_scale: float
    length_slope: float  # φ, per unit of t
    lc_winrate: dict[str, float] = field(default_factory=dict)
    raw_winrate: dict[str, float] = field(default_factory=dict)
    theta: dict[str, float] = field(default_factory=dict)
    # 95% intervals and the number of questions (clusters) behind each group's figures.
    lc_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    raw_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    lc_effect: dict[str, float] = field(default_factory=dict)
    lc_effect_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    raw_effect: dict[str, float] = field(default_factory=dict)
    raw_effect_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    n_questions: dict[str, int] = field(default_factory=dict)
    n_clusters: dict[str, int] = field(default_factory=dict)  # the questions of one prompt key are one


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
    # Each question's cluster for the intervals (0..n_c-1: the questions of one prompt key are
    # one); None: every question is its own.
    cluster: np.ndarray | None = None
    n_c: int = 0

    def take(self, mask: np.ndarray) -> Items:
        d = self
        return Items(
            d.g[mask], d.q[mask], d.t[mask], d.y[mask], d.w[mask], d.o[mask], d.n_g, d.n_q, d.control, d.cluster, d.n_c
        )

    def by_cluster(self, per_question: np.ndarray) -> np.ndarray:
        """Per-question values summed per cluster (the same values when each is its own)."""
        if self.cluster is None:
            return per_question
        return np.bincount(self.cluster, weights=per_question, minlength=self.n_c)

    @property
    def is_control(self) -> np.ndarray:
        return self.g == self.control


def _loss(w, y, eta) -> np.ndarray:
    """Binomial log loss with fractional outcomes; logaddexp keeps it finite for large |eta|."""
    return w * (np.logaddexp(0.0, eta) - y * eta)


class Model:
    """The penalised fit of one judge's items. Its parameters are one vector
    x = (θ_0 … θ_{G−1}, φ, γ_0 … γ_{Q−1}); each item's log-odds is θ_g + φ·t + o·γ_q."""

    def __init__(self, d: Items, lam: float):
        self.d, self.lam = d, lam
        # The penalty on each parameter: small and fixed on θ and φ, λ on γ.
        self.pen = np.concatenate([np.full(d.n_g + 1, FIXED_PENALTY), np.full(d.n_q, lam)])

    def split(self, x: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        """(θ, φ, γ) of a parameter vector."""
        n_g = self.d.n_g
        return x[:n_g], float(x[n_g]), x[n_g + 1 :]

    def eta(self, x: np.ndarray, d: Items | None = None) -> np.ndarray:
        """Each item's log-odds (of ``d``, by default the fitted items). Applied to a vector v
        that is not a fit, it is each item's xᵢ·v, which the intervals use."""
        d = self.d if d is None else d
        theta, phi, gamma = self.split(x)
        return theta[d.g] + phi * d.t + d.o * gamma[d.q]

    def gradient_terms(self, r: np.ndarray) -> np.ndarray:
        """Σᵢ rᵢ xᵢ, the log loss's gradient for rᵢ = wᵢ (pᵢ − yᵢ)."""
        d = self.d
        return np.concatenate(
            [
                np.bincount(d.g, weights=r, minlength=d.n_g),
                [r @ d.t],
                np.bincount(d.q, weights=r * d.o, minlength=d.n_q),
            ]
        )

    def objective(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """The penalised loss and its gradient."""
        d = self.d
        eta = self.eta(x)
        value = _loss(d.w, d.y, eta).sum() + (self.pen * x * x).sum()
        return float(value), self.gradient_terms(d.w * (expit(eta) - d.y)) + 2 * self.pen * x

    def hessian(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Hessian in its arrow shape: the dense block A of (θ, φ), the block B between
        (θ, φ) and γ, and the diagonal D of γ (each item has one question, so γ_q meets no
        other γ)."""
        d, n_g, n_q = self.d, self.d.n_g, self.d.n_q
        p = expit(self.eta(x))
        s = d.w * p * (1 - p)
        A = np.zeros((n_g + 1, n_g + 1))
        A[np.arange(n_g), np.arange(n_g)] = np.bincount(d.g, weights=s, minlength=n_g)
        A[n_g, :n_g] = A[:n_g, n_g] = np.bincount(d.g, weights=s * d.t, minlength=n_g)
        A[n_g, n_g] = s @ (d.t * d.t)
        A += np.diag(2 * self.pen[: n_g + 1])
        B = np.zeros((n_g + 1, n_q))
        B[:n_g] = np.bincount(d.g * n_q + d.q, weights=s * d.o, minlength=n_g * n_q).reshape(n_g, n_q)
        B[n_g] = np.bincount(d.q, weights=s * d.t * d.o, minlength=n_q)
        D = np.bincount(d.q, weights=s * d.o * d.o, minlength=n_q) + 2 * self.pen[n_g + 1 :]
        return A, B, D

    def solve(self, x: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """H⁻¹ rhs for the Hessian H at x, through the Schur complement of the diagonal γ block:
        a (G + 1)-square system however many questions there are."""
        A, B, D = self.hessian(x)
        n = A.shape[0]
        top, bottom = rhs[:n], rhs[n:]
        first = np.linalg.solve(A - (B / D) @ B.T, top - B @ (bottom / D))
        return np.concatenate([first, (bottom - B.T @ first) / D])

    def fit(self) -> np.ndarray:
        """The unique minimiser, by Newton's method with the exact Hessian from zero (a start
        that is its own mirror), halving a step until the loss does not rise."""
        x = np.zeros(len(self.pen))
        value, grad = self.objective(x)
        for _ in range(MAX_STEPS):
            if np.linalg.norm(grad) < GTOL:
                break
            step = self.solve(x, grad)
            scale = 1.0
            while (new := self.objective(x - scale * step))[0] > value:
                scale /= 2
                if scale < 1e-10:  # no decrease along Newton's direction: at the optimum
                    return x
            x, (value, grad) = x - scale * step, new
            # With many votes the summed loss's gradient cannot always reach GTOL in floating
            # point; a step this small means the optimum is reached to far better than 1e-6.
            if scale * np.max(np.abs(step)) < STEP_TOL:
                break
        return x


def question_folds(questions: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold number of each row: questions are dealt to folds in a seeded random order, so all
    items of a question share a fold and fold sizes differ by at most one question."""
    uniq, q = np.unique(questions, return_inverse=True)
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of_question = np.empty(len(uniq), dtype=np.int64)
    fold_of_question[order] = np.arange(len(uniq)) % folds
    return fold_of_question[q]


def choose_lambda(d: Items, lambdas: tuple[float, ...], folds: int, seed: int) -> tuple[float, list[float]]:
    """The λ with the least held-out log loss, and the loss of each λ (from the largest λ;
    ties go to the larger, simpler one). Each fold holds out the perturbation items of its
    questions; their control items stay in the fit, which so learns the held-out questions'
    γ_q from them, as a new question's would be known from its control item. The middle λ,
    without losses, when there is nothing to hold out. On at most ``CV_MAX_QUESTIONS``
    questions (a seeded choice): the penalty matters in small studies, in big ones the data
    outweigh it."""
    lambdas = tuple(sorted(lambdas, reverse=True))
    uniq = np.unique(d.q[~d.is_control])
    if len(lambdas) == 1 or len(uniq) < folds:
        return float(lambdas[len(lambdas) // 2]), []
    if len(uniq) > CV_MAX_QUESTIONS:
        d = d.take(np.isin(d.q, np.random.default_rng(seed).choice(uniq, CV_MAX_QUESTIONS, replace=False)))
    fold = question_folds(d.q, folds, seed)
    losses = []
    for lam in lambdas:
        total = 0.0
        for k in range(folds):
            held_out = (fold == k) & ~d.is_control
            model = Model(d.take(~held_out), lam)
            held = d.take(held_out)
            total += float(_loss(held.w, held.y, model.eta(model.fit(), held)).sum())
        losses.append(total)
    return float(lambdas[int(np.argmin(losses))]), losses


def length_scale(delta_len: np.ndarray, groups: np.ndarray) -> float:
    """The pooled within-group standard deviation of Δlen: a group whose competitor is always
    longer moves its mean, not the scale, and negating one group's Δlen leaves it alone."""
    means = pd.Series(delta_len).groupby(groups).transform("mean").to_numpy()
    spread = delta_len - means
    return float(np.sqrt(spread @ spread / max(len(delta_len) - len(np.unique(groups)), 1)))


def items(
    groups: np.ndarray,
    questions: np.ndarray,
    delta_len: np.ndarray,
    y: np.ndarray,
    weight: np.ndarray,
    *,
    orientation: np.ndarray | None = None,
    control: str = "control",
    clusters: np.ndarray | None = None,
) -> tuple[Items, list[str], float] | None:
    """The coded items (rows without votes or length left out), the group names and the
    length scale; None without any control item. ``clusters``: each row's cluster for the
    intervals, the same on every row of a question (default: the question)."""
    delta_len, weight = np.asarray(delta_len, dtype=float), np.asarray(weight, dtype=float)
    groups, y = np.asarray(groups).astype(str), np.asarray(y, dtype=float)
    orientation = np.ones(len(weight)) if orientation is None else np.asarray(orientation, dtype=float)
    columns = {"groups": groups, "questions": np.asarray(questions), "delta_len": delta_len, "y": y}
    _check({**columns, "weight": weight, "orientation": orientation})
    keep = (weight > 0) & ~np.isnan(delta_len)
    if not (keep & (groups == control)).any():
        return None
    g, names = pd.factorize(groups[keep], sort=True)
    q, question_ids = pd.factorize(np.asarray(questions)[keep], sort=True)
    delta_len = delta_len[keep]
    scale = length_scale(delta_len, g)
    d = Items(
        g=g,
        q=q,
        t=np.tanh(delta_len / scale) if scale > 0 else np.zeros_like(delta_len),
        y=y[keep],
        w=weight[keep],
        o=orientation[keep],
        n_g=len(names),
        n_q=len(question_ids),
        control=int(np.flatnonzero(np.asarray(names) == control)[0]),
    )
    if clusters is not None:
        of_question = np.zeros(d.n_q, dtype=np.int64)
        of_question[q] = pd.factorize(np.asarray(clusters)[keep])[0]
        d.cluster, d.n_c = of_question, int(of_question.max(initial=-1)) + 1
    return d, [str(n) for n in names], scale


def _check(columns: dict[str, np.ndarray]) -> None:
    """A clear error for input the model cannot read, naming the column and the first bad row."""
    weight = columns["weight"]
    for name, values in columns.items():
        if len(values) != len(weight):
            raise ValueError(f"length-controlled fit: {name} has {len(values)} rows, weight has {len(weight)}")
    counted = weight > 0
    rules = (
        ("weight", "a number of votes", ~(weight >= 0)),
        ("y", "a share between 0 and 1", counted & ~((columns["y"] >= 0) & (columns["y"] <= 1))),
        ("orientation", "+1, -1 or 0", counted & ~np.isin(columns["orientation"], (-1.0, 0.0, 1.0))),
    )
    for name, what, bad in rules:
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"length-controlled fit: {name} must be {what}; row {row} has {columns[name][row]}")


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
    clusters: np.ndarray | None = None,
) -> LCResult | None:
    """Fit the model on items (one row each). ``y`` is the share of the competitor's wins with
    ties as half; ``weight`` the number of votes; ``orientation`` +1 where the item's competitor
    is the control's A2 or made from it, −1 where it is the control's A1 or made from it, 0 when
    unknown (default +1 everywhere). ``clusters``: each item's cluster for the intervals (the
    questions of one prompt key are one; default: its question). None when no control item has
    votes: the LC effects are against the control."""
    coded = items(groups, questions, delta_len, y, weight, orientation=orientation, control=control, clusters=clusters)
    if coded is None:
        return None
    d, names, scale = coded
    lam, _ = choose_lambda(d, lambdas, folds, seed)
    model = Model(d, lam)
    return _result(model, model.fit(), names, scale)


def _result(model: Model, x: np.ndarray, names: list[str], scale: float) -> LCResult:
    d = model.d
    theta, phi, _ = model.split(x)
    infl = _Influence(model, x)
    res = LCResult(groups=names, control=names[d.control], lam=model.lam, length_scale=scale, length_slope=phi)
    lc_if, raw_if = {}, {}
    for j, name in enumerate(names):
        rows = d.g == j
        in_group = np.unique(d.q[rows])
        res.n_questions[name] = len(in_group)
        # The intervals see each cluster's influence (a question, or the questions of one prompt key).
        n_q = res.n_clusters[name] = len(in_group) if d.cluster is None else len(np.unique(d.cluster[in_group]))
        res.theta[name] = float(theta[j])
        res.lc_winrate[name], lc_if[name] = infl.winrate(rows)
        res.raw_winrate[name], raw_if[name] = infl.ratio(rows, d.w * d.y, d.w)
        lc_if[name], raw_if[name] = d.by_cluster(lc_if[name]), d.by_cluster(raw_if[name])
        if _sd(raw_if[name]) == 0:
            # Every question alike (e.g. all votes on one side): θ_g then sits where the penalty
            # holds it, the sandwich sees no spread, and the rate falls back as the raw one does.
            lc_if[name] = np.zeros_like(lc_if[name])
        res.lc_ci[name] = _rate_ci(res.lc_winrate[name], lc_if[name], n_q)
        res.raw_ci[name] = _rate_ci(res.raw_winrate[name], raw_if[name], n_q)
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
                value[name], inf[name] - inf[c], (rate[name], res.n_clusters[name]), (rate[c], res.n_clusters[c])
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
    """Per-question influence of each figure: the sandwich of the M-estimator, clustered by
    question.

    The fitted x solves Σ_q u_q(x) = 0, where u_q is question q's share of the penalised
    gradient: its items' Σ rᵢ xᵢ (rᵢ = wᵢ (pᵢ − yᵢ)), its own γ_q's penalty, and 1/Q of the
    penalty on θ and φ. For a figure R = Σ_q a_q / Σ_q n_q over a group's items, the influence
    of question q is (a_q − R n_q)/N − vᵀu_q with v = H⁻¹ ∂R/∂x, H the Hessian.
    """

    def __init__(self, model: Model, x: np.ndarray):
        d = model.d
        self.model, self.x, self.d = model, x, d
        self.r = d.w * (expit(model.eta(x)) - d.y)
        n_g = d.n_g
        self.theta_phi_penalty = 2 * model.pen[: n_g + 1] * x[: n_g + 1] / d.n_q
        self.gamma_penalty = 2 * model.pen[n_g + 1 :] * x[n_g + 1 :]

    def ratio(self, rows: np.ndarray, num: np.ndarray, den: np.ndarray) -> tuple[float, np.ndarray]:
        """Σ num / Σ den over ``rows``, a figure without fitted parameters, with its influence."""
        q, n_q = self.d.q[rows], self.d.n_q
        a = np.bincount(q, weights=num[rows], minlength=n_q)
        n = np.bincount(q, weights=den[rows], minlength=n_q)
        value = a.sum() / n.sum()
        return float(value), (a - value * n) / n.sum()

    def winrate(self, rows: np.ndarray) -> tuple[float, np.ndarray]:
        """The vote-weighted mean of logistic(θ_g + o·γ_q) over ``rows`` (one group's items),
        with its influence."""
        d, model = self.d, self.model
        theta, _, gamma = model.split(self.x)
        p0 = expit(theta[d.g] + d.o * gamma[d.q])
        value, direct = self.ratio(rows, d.w * p0, d.w)
        # ∂R/∂x: through θ_g and each γ_q of the group's items (φ is not in the prediction).
        dp = np.where(rows, d.w * p0 * (1 - p0), 0.0) / d.w[rows].sum()
        grad = model.gradient_terms(dp)
        grad[d.n_g] = 0.0
        v = model.solve(self.x, grad)
        # vᵀu_q: each item's xᵢ·v is the model's log-odds at v.
        n_g = d.n_g
        sensitivity = (
            np.bincount(d.q, weights=self.r * model.eta(v), minlength=d.n_q)
            + self.theta_phi_penalty @ v[: n_g + 1]
            + self.gamma_penalty * v[n_g + 1 :]
        )
        return value, direct - sensitivity
