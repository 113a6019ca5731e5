"""AlpacaEval-compatible length-controlled win rates: one joint fit over every model compared
with one baseline (Dubois et al. 2024, "Length-Controlled AlpacaEval"; SPEC's LC paragraph).

Each row is one instruction i answered by the baseline and by model m, with the judge's
preference y ∈ [0, 1] for the model's answer (a soft label: AlpacaEval's ``preference − 1``; a
vote is 1, 0, or ½ for a tie) and Δ = len(model's answer) − len(baseline's answer) in
characters. The model is

    logit P(model m wins on i) = θ_m + φ_m · tanh(Δ / sd_m) + γ_i

with sd_m the sample standard deviation of Δ over m's rows. **Sign**: φ > 0 means the judge
favours the longer answer; AlpacaEval's ``Δ`` is baseline minus model, so its length
coefficient is −φ.

- γ_i, the instruction's difficulty, is estimated jointly and shared by every model.
  AlpacaEval reads a fixed difficulty d_i from a file and gives each model its own coefficient
  on it; estimating both here makes the model bilinear (θ_m + β_m γ_i is not convex in (β, γ)),
  so it could stop at a local optimum. One shared γ keeps the fit convex, and it reproduces
  the leaderboard within its tolerance (docs/REPRODUCTIONS.md).
- AlpacaEval pulls each model's slope towards the judge's reaction to length in two "gamed"
  versions of the baseline, whose annotations are not public in the repository. Their stand-in
  here is a penalty ``λ_φ Σ_m (φ_m − φ̄)²`` that pools the slopes towards a common slope φ̄ (a
  free parameter), with ``λ_φ = SLOPE_POOLING × (number of instructions)``, so that its weight
  against the data does not change with the size of the benchmark. SLOPE_POOLING was chosen
  on half of the leaderboard's models (docs/REPRODUCTIONS.md) and checked on the other half.
- ``DIFFICULTY_RIDGE`` on γ and ``THETA_RIDGE`` on θ only keep the optimum finite (an
  instruction every model loses outright); a γ shift traded against θ does not change any rate.

Every term is a convex function of (θ, φ, φ̄, γ) and the penalty is strictly convex in the
directions the data do not fix, so the optimum is unique; Newton's method with the exact
Hessian (and step halving) finds it to a gradient below GTOL or a step below STEP_TOL.

LC_m = mean over m's instructions of logistic(θ_m + γ_i): the model's predicted preference had
its answer been as long as the baseline's. Its 95 % interval is a cluster-robust (sandwich,
clustered by instruction) variance with the delta method, on the logit scale.
``alpaca_eval_se`` is AlpacaEval's own ``lc_standard_error`` (the standard error of the
predicted values over instructions), given for comparison with the leaderboard; it is not a
sampling interval of the rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import expit, logit

from analysis import loader
from analysis.frame import Filters, apply_filters, by_judge
from analysis.stats import Z95
from annotations.models import Study

METHOD = "alpaca_eval"
SLOPE_POOLING = 10.0
DIFFICULTY_RIDGE = 0.01
THETA_RIDGE = 1e-6
# Newton stops when the gradient (a sum over rows) or the step is this small: the parameters
# then sit far closer to the optimum than the rates' 0.01-point printing shows.
GTOL = 1e-7
STEP_TOL = 1e-10
MAX_STEPS = 100


@dataclass
class AlpacaLC:
    """Per model (percent for rates): the LC win rate, its 95 % interval, the raw win rate
    (mean of y), θ, the length slope φ and the length scale sd; plus what the fit shared."""

    models: list[str]
    lc_winrate: dict[str, float] = field(default_factory=dict)
    lc_interval: dict[str, tuple[float, float]] = field(default_factory=dict)
    alpaca_eval_se: dict[str, float] = field(default_factory=dict)
    raw_winrate: dict[str, float] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)
    theta: dict[str, float] = field(default_factory=dict)
    slope: dict[str, float] = field(default_factory=dict)
    length_sd: dict[str, float] = field(default_factory=dict)
    common_slope: float = 0.0
    difficulty: dict = field(default_factory=dict)  # instruction → γ
    slope_penalty: float = 0.0
    instructions: int = 0

    def rows(self) -> list[dict]:
        """One row per model, highest LC first (the leaderboard's order)."""
        out = [
            {
                "model": m,
                "n": self.n[m],
                "raw_winrate": self.raw_winrate[m],
                "lc_winrate": self.lc_winrate[m],
                "lc_low": self.lc_interval[m][0],
                "lc_high": self.lc_interval[m][1],
                "alpaca_eval_se": self.alpaca_eval_se[m],
                "length_slope": self.slope[m],
                "length_sd": self.length_sd[m],
            }
            for m in self.models
        ]
        return sorted(out, key=lambda row: -row["lc_winrate"])


def fit(
    models, instructions, delta, y, *, slope_pooling: float = SLOPE_POOLING, difficulty_ridge: float = DIFFICULTY_RIDGE
) -> AlpacaLC:
    """The joint fit (module docstring). ``models``/``instructions``: a label per row;
    ``delta``: characters, model minus baseline; ``y``: the preference for the model in [0, 1]."""
    delta, y = np.asarray(delta, dtype=float), np.asarray(y, dtype=float)
    n = len(y)
    if not (len(models) == len(instructions) == len(delta) == n):
        raise ValueError("models, instructions, delta and y must have one value per row")
    if n == 0:
        raise ValueError("no rows to fit")
    if not np.isfinite(delta).all():
        raise ValueError("every length difference must be a finite number")
    if not (np.isfinite(y).all() and (y >= 0).all() and (y <= 1).all()):
        raise ValueError("every preference must be a number in [0, 1]")
    m_code, names = pd.factorize(pd.Series(models, dtype=object), sort=True)
    i_code, instr = pd.factorize(pd.Series(instructions, dtype=object), sort=True)
    n_models, n_instr = len(names), len(instr)

    sd = pd.Series(delta).groupby(m_code).std().reindex(range(n_models)).to_numpy()
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)  # one row, or equal lengths: t = tanh(Δ)
    t = np.tanh(delta / sd[m_code])

    # Parameters: θ (n_models), φ (n_models), φ̄ (1), γ (n_instr).
    slope_at, bar_at, gamma_at = n_models, 2 * n_models, 2 * n_models + 1
    size = gamma_at + n_instr
    rows = np.repeat(np.arange(n), 3)
    cols = np.column_stack([m_code, slope_at + m_code, gamma_at + i_code]).ravel()
    x = sp.csr_matrix((np.column_stack([np.ones(n), t, np.ones(n)]).ravel(), (rows, cols)), shape=(n, size))
    lam = slope_pooling * n_instr
    pool = np.zeros((n_models, size))
    pool[np.arange(n_models), slope_at + np.arange(n_models)] = 1.0
    pool[:, bar_at] = -1.0
    penalty = lam * pool.T @ pool
    penalty[:n_models, :n_models] += THETA_RIDGE * np.eye(n_models)
    penalty[gamma_at:, gamma_at:] += difficulty_ridge * np.eye(n_instr)

    beta = _newton(x, y, penalty)
    p = expit(x @ beta)
    hessian = (x.T @ sp.diags(p * (1 - p)) @ x).toarray() + penalty
    # Each instruction's scores summed: the cluster-robust "meat" of the sandwich.
    clusters = sp.csr_matrix((np.ones(n), (i_code, np.arange(n))), shape=(n_instr, n))
    scores = (clusters @ x.multiply((p - y)[:, None])).toarray()
    bread = np.linalg.inv(hessian)
    cov = bread @ (scores.T @ scores) @ bread

    out = AlpacaLC(
        models=[str(m) for m in names],
        common_slope=float(beta[bar_at]),
        difficulty={k: float(v) for k, v in zip(instr, beta[gamma_at:], strict=True)},
        slope_penalty=lam,
        instructions=n_instr,
    )
    theta, gamma = beta[:n_models], beta[gamma_at:]
    for k, name in enumerate(out.models):
        own = np.unique(i_code[m_code == k])  # the instructions the model answered
        pred = expit(theta[k] + gamma[own])
        rate = float(pred.mean())
        grad = np.zeros(size)
        dens = pred * (1 - pred) / len(own)
        grad[k] = dens.sum()
        grad[gamma_at + own] = dens
        se = float(np.sqrt(max(grad @ cov @ grad, 0.0)))
        half = Z95 * se / (rate * (1 - rate))
        out.lc_winrate[name] = 100 * rate
        out.lc_interval[name] = (100 * float(expit(logit(rate) - half)), 100 * float(expit(logit(rate) + half)))
        out.alpaca_eval_se[name] = 100 * float(pred.std(ddof=1) / np.sqrt(len(pred))) if len(pred) > 1 else 0.0
        out.raw_winrate[name] = 100 * float(y[m_code == k].mean())
        out.n[name] = int((m_code == k).sum())
        out.theta[name] = float(theta[k])
        out.slope[name] = float(beta[slope_at + k])
        out.length_sd[name] = float(sd[k])
    return out


def _newton(x: sp.csr_matrix, y: np.ndarray, penalty: np.ndarray) -> np.ndarray:
    """The minimiser of the penalised soft-label log loss, from zero."""
    beta = np.zeros(x.shape[1])

    def loss(b: np.ndarray) -> float:
        eta = x @ b
        return float(np.sum(np.logaddexp(0, eta) - y * eta) + 0.5 * b @ penalty @ b)

    current = loss(beta)
    for _ in range(MAX_STEPS):
        p = expit(x @ beta)
        grad = x.T @ (p - y) + penalty @ beta
        if np.abs(grad).max() < GTOL:
            return beta
        hessian = (x.T @ sp.diags(p * (1 - p)) @ x).toarray() + penalty
        step = np.linalg.solve(hessian, grad)
        scale = 1.0
        while (new := loss(beta - scale * step)) > current and scale > 1e-8:
            scale /= 2
        beta, current = beta - scale * step, new
        if np.abs(scale * step).max() < STEP_TOL:
            return beta
    raise ArithmeticError(f"the AlpacaEval-compatible LC fit did not converge in {MAX_STEPS} Newton steps")


def frame_inputs(votes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(models, instructions, Δ in characters, y) from a votes frame (analysis.frame) whose A1 is
    the baseline. The model is the system that wrote A2 (``a2_system``; else the question's
    ``subset``); the instruction is the question's external id without its ``<subset>#`` prefix
    (``import_votes --format alpaca_eval`` names questions ``<model>#<n>``), so the questions of
    different models on one instruction share its difficulty. y is the judge's probability for
    A2 where the vote has option probabilities (a tie's probability counting half; the three taken as shares of their sum), else the
    vote: 1 for A2, ½ for a tie, 0 for A1."""
    system = votes["a2_system"].astype(str).to_numpy(dtype=object)
    subset = votes["subset"].astype(str).to_numpy(dtype=object)
    models = np.where(system != "", system, subset)
    if (models == "").any():
        first = votes["question_ext"].to_numpy(dtype=object)[np.flatnonzero(models == "")[0]]
        raise ValueError(
            f"question {first!r}: the AlpacaEval-compatible LC needs the system that wrote A2 (or a subset) "
            "to know which model each vote compares with the baseline"
        )
    ext = votes["question_ext"].astype(str).to_numpy(dtype=object)
    instructions = np.array(
        [e[len(s) + 1 :] if s and e.startswith(s + "#") else e for e, s in zip(ext, subset, strict=True)],
        dtype=object,
    )
    length = {side: votes[f"len_{side}_chars"].to_numpy(dtype=float) for side in ("a1", "a2")}
    delta = length["a2"] - length["a1"]
    if not np.isfinite(delta).all():
        raise ValueError("the AlpacaEval-compatible LC needs every answer's length in characters")
    choice = votes["choice"].astype(object).to_numpy()
    y = np.select([choice == "a2", choice == "tie"], [1.0, 0.5], 0.0)
    first, second, tie = (votes[f"prob_{o}"].to_numpy(dtype=float) for o in ("first", "second", "tie"))
    a1_first = votes["shown_first"].astype(str).to_numpy(dtype=object) == "a1"
    total = first + second + tie
    with np.errstate(invalid="ignore", divide="ignore"):
        prob_a2 = (np.where(a1_first, second, first) + tie / 2) / total
    has_probs = np.isfinite(prob_a2)
    y[has_probs] = prob_a2[has_probs]
    return models, instructions, delta, y


def study_lc_alpaca(*, study: Study, filters: Filters | None = None) -> dict[str, AlpacaLC]:
    """Per judge, the AlpacaEval-compatible LC win rates of every model against the study's
    baseline A1 (`fit`), from the judge's counted votes: a study of
    ``import_votes --format alpaca_eval``, or any study whose A2 answers name their system."""
    counted, _, _ = apply_filters(loader.study_frame(study), filters or Filters())
    return {judge: fit(*frame_inputs(votes)) for judge, votes in by_judge(counted).items() if len(votes)}
