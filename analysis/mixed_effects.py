"""How raters and questions differ: a logistic mixed model of one judge's choices.

For one judge, on its decisive votes (ties left out: the model is of which answer was taken
when one was), the log-odds of taking a question's *reference answer* are

    logit P(took the reference answer) = intercept
                                         + effect[g] · side        for a vote on group g's item
                                         + position · first
                                         + rater[r] + question[q]

- The reference answer of a question is the original its control item shows as A2 (without a
  control vote, the A2 of its first item). ``side`` is +1 when the vote's item has its perturbed
  answer (A2p) on the reference side and −1 when the perturbation was applied to the other
  original (published data puts it into either: SPEC, "A2"). So ``effect[g]`` is how much group
  g's perturbation moves the log-odds towards the perturbed answer, against the same original
  unperturbed in the control item: 0 = no pull, > 0 towards A2p, < 0 away from it.
- ``first`` is +1 when the reference answer was shown first, −1 when it was shown second, 0 where
  the display order is unknown. ``position`` is then the log-odds of taking the answer shown
  first when the two answers are otherwise even (as ``analysis.labels`` codes it: a share of
  expit(position) takes the first answer), and twice it the log odds ratio of an answer shown
  first against the same answer shown second.
- ``rater[r]`` ~ N(0, sd_rater²) and ``question[q]`` ~ N(0, sd_question²) are crossed random
  intercepts: how much raters differ in how often they take a question's reference answer,
  beyond what the question, the perturbation and the display order explain, and how much
  questions differ in how clearly they favour one answer. A judge whose votes name no rater (an
  LLM judge: its repeated votes on an item are draws from the same judge, not different people
  who each voted on many items) gets the question term alone and no rater figure.

The fit is gpboost's (``GPModel``, likelihood ``bernoulli_logit``: the Laplace approximation of
the marginal likelihood, fixed effects and variances estimated together). The fixed effects'
standard errors come from the same Laplace approximation at the fit (``coefficient_covariance``:
gpboost's own were unusable on simulated studies), the variances' from gpboost.
Intervals are Wald intervals: for an effect, estimate ± 1.96 SE; for an SD, the variance's
interval on the log scale (log v ± 1.96 SE(v)/v), square-rooted, so that it stays positive. A
variance estimated at zero, or within one standard error of it, has no interval (the note says so). ``docs/STATISTICS.md`` gives the simulation that
checks bias and coverage.

A model that cannot be fitted (too few decisive votes, questions or raters, no variation, every
vote taking the first answer) gives estimates of None and says why with the numbers
(``MixedFit.note``); a perturbation whose votes all went one way has an infinite effect: it is
left out of the fit and named.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import sparse
from scipy import stats as sps
from scipy.sparse.linalg import splu
from scipy.special import expit

from analysis.frame import CONTROL, equals
from analysis.rows import NUMBER, Figure, Row, judge_metric, row

if TYPE_CHECKING:
    from analysis.judge_metrics import JudgeData

# Below these the variances are not worth estimating: decisive votes in the fit; questions with
# two or more decisive votes (one vote per question says nothing about how questions differ);
# raters with two or more (below it the rater term is left out and the note says so).
MIN_VOTES = 50
MIN_QUESTIONS = 10
MIN_RATERS = 5
# The fit's CPU time grows with the votes, faster with raters (the crossed terms' sparse
# Cholesky factor; docs/BENCHMARKS.md, "Mixed model"). A report is computed in the request up to
# 200,000 votes (settings.ANALYSIS_BACKGROUND_VOTES): a judge with more decisive votes than
# MAX_VOTES_WITH_RATERS is fitted without the rater term, one with more than MAX_VOTES not at
# all, and the notes say so.
MAX_VOTES_WITH_RATERS = 30_000
MAX_VOTES = 500_000

Z95 = float(sps.norm.ppf(0.975))
VARIANCE_ZERO = 1e-8  # a variance at or below this is taken as 0 (estimated on the boundary)
TIES = "ties left out"
METHOD = (
    "logistic mixed model of taking each question's reference answer on decisive votes (ties left out): "
    "each perturbation's effect towards the perturbed answer against the control and the position effect "
    "(log-odds towards the answer shown first, ±1 coding) as fixed effects, crossed random intercepts for "
    "rater and question (question alone for a judge without raters); gpboost's Laplace approximation; "
    "Wald intervals, the SDs' on the log variance"
)


@dataclass
class Effect:
    """A fixed effect in log-odds, its standard error, 95% interval and two-sided p-value; the
    interval and p-value are None where the fit gave no standard error."""

    value: float
    se: float | None
    ci: tuple[float | None, float | None]
    p_value: float | None


@dataclass
class Spread:
    """A random intercept's standard deviation (log-odds) with its 95% interval (None where the
    variance is estimated at zero or has no standard error), and how many levels it has."""

    value: float | None
    ci: tuple[float | None, float | None]
    levels: int
    note: str = ""


@dataclass
class MixedFit:
    """One judge's fit. ``effects`` has every group asked for: an ``Effect``, or None with the
    reason in ``group_notes``. ``note`` is why nothing was fitted ("" when it was);
    ``terms`` the random terms fitted ("rater + question", "question" or "")."""

    effects: dict[str, Effect | None]
    group_notes: dict[str, str]
    group_votes: dict[str, int]  # decisive votes per group (in the fit or not)
    group_questions: dict[str, int]
    position: Effect | None
    position_note: str
    sd_rater: Spread | None
    sd_question: Spread | None
    n_votes: int  # decisive votes in the fit
    n_ties: int  # ties left out
    n_questions: int
    n_raters: int
    terms: str
    note: str
    warnings: list[str] = field(default_factory=list)  # what gpboost said during the fit

    @property
    def summary(self) -> str:
        """The sizes the fit stands on, for a row's note."""
        parts = [f"{self.n_votes:,} decisive votes ({self.n_ties:,} ties left out)", f"{self.n_questions} questions"]
        if self.n_raters:
            parts.append(f"{self.n_raters} raters")
        return ", ".join(parts)


@dataclass
class Design:
    """The decisive votes as the model reads them (see the module's doc)."""

    took_reference: np.ndarray  # float 0/1
    side: np.ndarray  # +1 / −1: the perturbed answer is the reference answer / the other one
    first: np.ndarray  # +1 / −1 / 0: the reference answer shown first / second / order unknown
    group: np.ndarray  # object: each vote's group
    question: np.ndarray  # int codes
    rater: np.ndarray | None  # int codes (−1: the vote names no rater), None when no vote names one
    n_ties: int
    n_unoriented: int  # votes whose item shares no original with its question's reference


def design(votes: pd.DataFrame, roots: pd.DataFrame) -> Design:
    """The model's view of one judge's counted votes (columns item_id, question_id, group,
    choice, shown_first, order_known, rater): ``roots`` gives each item's ``a1_root`` and
    ``a2_root`` by ``item_id`` (the judge's item preferences carry them)."""
    item = votes["item_id"].to_numpy(dtype=np.int64)
    roots = roots.drop_duplicates("item_id").set_index("item_id")
    a1 = roots["a1_root"].reindex(item).to_numpy(dtype=float)
    a2 = roots["a2_root"].reindex(item).to_numpy(dtype=float)
    question = votes["question_id"].to_numpy(dtype=np.int64)
    is_control = equals(votes["group"], CONTROL)
    # Each question's reference: the A2 of its control item, else of its first item.
    order = np.lexsort((item, ~is_control, question))
    first_of_question = order[np.r_[True, question[order][1:] != question[order][:-1]]]
    reference = pd.Series(a2[first_of_question], index=question[first_of_question]).reindex(question).to_numpy()
    side = np.where(a2 == reference, 1, np.where(a1 == reference, -1, 0))
    chose_a1, chose_a2 = equals(votes["choice"], "a1"), equals(votes["choice"], "a2")
    tie = equals(votes["choice"], "tie")
    keep = (chose_a1 | chose_a2) & (side != 0)
    n_unoriented = int(((chose_a1 | chose_a2) & (side == 0)).sum())
    side = side[keep]
    took_reference = np.where(side == 1, chose_a2[keep], chose_a1[keep]).astype(float)
    reference_first = equals(votes["shown_first"], "a2")[keep] == (side == 1)
    first = np.where(votes["order_known"].to_numpy()[keep], np.where(reference_first, 1, -1), 0)
    raters = votes["rater"].to_numpy(dtype=object)[keep]
    rater = None
    if (raters != "").any():
        rater = pd.factorize(raters)[0]
        rater[raters == ""] = -1
    return Design(
        took_reference=took_reference,
        side=side.astype(float),
        first=first.astype(float),
        group=votes["group"].to_numpy(dtype=object)[keep],
        question=pd.factorize(question[keep])[0],
        rater=rater,
        n_ties=int(tie.sum()),
        n_unoriented=n_unoriented,
    )


def _repeated(codes: np.ndarray) -> int:
    """How many levels have two or more votes."""
    return int((np.bincount(codes) >= 2).sum()) if len(codes) else 0


def fit(votes: pd.DataFrame, roots: pd.DataFrame, groups: list[str]) -> MixedFit:
    """The mixed model of one judge's counted votes (see ``design`` and the module's doc), with
    an effect for each of ``groups`` (perturbation groups; the control is the baseline).

    Votes with a rater are modelled with the rater term where every decisive vote names one and
    enough raters voted twice or more; otherwise the question term alone, with a note."""
    d = design(votes, roots)
    return fit_design(d, groups)


def fit_design(d: Design, groups: list[str]) -> MixedFit:
    """``fit`` on a design already made."""
    result = MixedFit(
        effects=dict.fromkeys(groups),
        group_notes={},
        group_votes={g: int((d.group == g).sum()) for g in groups},
        group_questions={g: len(np.unique(d.question[d.group == g])) for g in groups},
        position=None,
        position_note="",
        sd_rater=None,
        sd_question=None,
        n_votes=len(d.took_reference),
        n_ties=d.n_ties,
        n_questions=len(np.unique(d.question)),
        n_raters=len(np.unique(d.rater[d.rater >= 0])) if d.rater is not None else 0,
        terms="",
        note="",
    )
    keep, columns = _modelled_groups(d, groups, result)
    y, first, question = d.took_reference[keep], d.first[keep], pd.factorize(d.question[keep])[0]
    why = _cannot_fit(y, first, question, d.n_ties)
    if why:
        result.note = f"not fitted: {why}"
        return result
    x = {"intercept": np.ones(len(y))}
    for g in columns:
        x[g] = np.where(d.group[keep] == g, d.side[keep], 0.0)
    if (first > 0).any() and (first < 0).any():
        x["position"] = first
    elif not (d.first != 0).any():
        result.position_note = "the display order is unknown for every vote"
    else:
        result.position_note = "every vote showed the reference answer on the same side"
    rater, rater_note = _rater_term(d.rater[keep] if d.rater is not None else None)
    result.n_votes, result.n_questions = len(y), int(question.max()) + 1
    result.n_raters = int(rater.max()) + 1 if rater is not None else result.n_raters
    group_data = np.column_stack([rater, question]) if rater is not None else question[:, None]
    result.terms = "rater + question" if rater is not None else "question"

    x_matrix = np.column_stack(list(x.values()))
    found = _gpboost_fit(y, x_matrix, group_data)
    if isinstance(found, str):
        result.note = f"not fitted: the fit failed ({found})"
        return result
    coef, variances, variance_se, modes, result.warnings = found
    try:
        coef_se = np.sqrt(np.diag(coefficient_covariance(x_matrix, group_data, coef, variances, modes)))
    except (np.linalg.LinAlgError, RuntimeError):  # singular: splu raises RuntimeError
        coef_se = np.full(len(coef), np.nan)
    for name, value, se in zip(x, coef, coef_se, strict=True):
        if name == "position":
            result.position = _effect(value, se)
        elif name in columns:
            result.effects[name] = _effect(value, se)
    levels = group_data.max(axis=0) + 1
    spreads = [_spread(v, se, k) for v, se, k in zip(variances, variance_se, levels, strict=True)]
    result.sd_question = spreads[-1]
    result.sd_rater = spreads[0] if rater is not None else Spread(None, (None, None), result.n_raters, rater_note)
    return result


def _modelled_groups(d: Design, groups: list[str], result: MixedFit) -> tuple[np.ndarray, list[str]]:
    """(the votes in the fit, the groups with an effect): a group with decisive votes, beside
    control votes, not all taking one answer; why each other group has none goes in
    ``result.group_notes``, and its votes leave the fit. Votes of groups not asked for (a group
    filtered out elsewhere) are not modelled either."""
    columns: list[str] = []
    has_control = bool((d.group == CONTROL).any())
    for g in groups:
        in_group = d.group == g
        k = result.group_votes[g]
        took_perturbed = d.took_reference[in_group] == (d.side[in_group] > 0)
        if not k:
            result.group_notes[g] = "no decisive votes in this group"
        elif not has_control:
            result.group_notes[g] = "no decisive vote on a control item: the effect is against the control"
        elif took_perturbed.all() or not took_perturbed.any():
            which = "the perturbed answer" if took_perturbed.all() else "the other answer"
            result.group_notes[g] = f"all {k} decisive votes took {which}: the effect is infinite; left out of the fit"
        else:
            columns.append(g)
    return (d.group == CONTROL) | np.isin(d.group, columns), columns


def _cannot_fit(y: np.ndarray, first: np.ndarray, question: np.ndarray, n_ties: int) -> str:
    """Why the model cannot be fitted on these votes, with the numbers; "" when it can."""
    n = len(y)
    if n < MIN_VOTES:
        return f"{n} decisive votes ({n_ties} ties left out); the model needs {MIN_VOTES}"
    repeated = _repeated(question)
    if repeated < MIN_QUESTIONS:
        return f"{repeated} questions with two or more decisive votes; how questions differ needs {MIN_QUESTIONS}"
    if y.all() or not y.any():
        return f"all {n} decisive votes in the fit took the same answer of their question: nothing varies"
    known = first != 0
    took_first = y[known] == (first[known] > 0)
    if known.any() and (took_first.all() or not took_first.any()):
        where = "first" if took_first.all() else "second"
        return (
            f"all {int(known.sum())} decisive votes whose order is known took the answer shown {where}: "
            "the position effect is infinite and the others cannot be told from it"
        )
    if n > MAX_VOTES:
        return f"{n:,} decisive votes, above the {MAX_VOTES:,} this report fits"
    return ""


def _rater_term(rater: np.ndarray | None) -> tuple[np.ndarray | None, str]:
    """The rater codes the fit uses (None: no rater term) and, without them, why."""
    if rater is None:
        return None, "no raters: the judge's votes name none (an LLM judge's repeated votes are draws of one judge)"
    unnamed = int((rater < 0).sum())
    if unnamed:
        return (
            None,
            f"{unnamed} of {len(rater)} decisive votes name no rater: the rater term needs every vote to name one",
        )
    codes = pd.factorize(rater)[0]
    repeated = _repeated(codes)
    if repeated < MIN_RATERS:
        return None, f"{repeated} raters with two or more decisive votes; how raters differ needs {MIN_RATERS}"
    if len(codes) > MAX_VOTES_WITH_RATERS:
        return None, (
            f"not fitted with raters above {MAX_VOTES_WITH_RATERS:,} decisive votes (this judge has {len(codes):,}): "
            "the crossed fit's time grows with them"
        )
    return codes, ""


def _effect(value: float, se: float) -> Effect:
    if not np.isfinite(se) or se <= 0:
        return Effect(float(value), None, (None, None), None)
    z = value / se
    return Effect(
        float(value),
        float(se),
        (float(value - Z95 * se), float(value + Z95 * se)),
        float(2 * sps.norm.sf(abs(z))),
    )


def _spread(variance: float, se: float, levels: int) -> Spread:
    if not np.isfinite(variance):
        return Spread(None, (None, None), int(levels), note="the variance could not be estimated")
    sd = float(np.sqrt(max(variance, 0.0)))
    if variance <= VARIANCE_ZERO:
        return Spread(0.0, (None, None), int(levels), note="estimated at 0: no interval")
    if not np.isfinite(se) or se <= 0:
        return Spread(sd, (None, None), int(levels), note="no standard error for this variance")
    if se > variance:
        # The log-scale interval then spans orders of magnitude ([0.00, 143] for 10 raters who
        # differ little): a Wald interval says nothing this close to 0.
        return Spread(
            sd,
            (None, None),
            int(levels),
            note=f"no interval: the variance {variance:.2g} is within its standard error {se:.2g} of 0",
        )
    half = Z95 * se / variance
    return Spread(sd, (float(np.sqrt(variance * np.exp(-half))), float(np.sqrt(variance * np.exp(half)))), int(levels))


_GPBOOST_LOGGER = "analysis.mixed_effects.gpboost"


class _ThreadMessages(logging.Handler):
    """The messages gpboost logs in this thread (a report may run beside another in a thread
    of the same process: each fit keeps only its own)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage().strip())


def _gpboost_fit(y: np.ndarray, x: np.ndarray, group_data: np.ndarray):
    """(coefficients, variances, their SEs, each vote's random effects at the mode, gpboost's
    messages), or why the fit failed. gpboost is imported here, not at the top: it brings
    scikit-learn, about a second of every process's start (a command, a worker) that never
    fits a model."""
    import gpboost

    logger = logging.getLogger(_GPBOOST_LOGGER)
    if not logger.handlers:
        # gpboost prints its native messages to stdout unless given a logger: they would land in
        # ``analyze --json``'s output. Kept out of the root logger; each fit collects its own.
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(logging.NullHandler())
        gpboost.register_logger(logger)
    handler = _ThreadMessages()
    logger.addHandler(handler)
    try:
        model = gpboost.GPModel(group_data=group_data, likelihood="bernoulli_logit", num_parallel_threads=1, seed=0)
        # A tighter convergence tolerance than gpboost's 1e-6: with it, the same votes in another
        # order moved the rater variance's standard error by 15% (1e-9: by 1%), at 40% more time.
        model.fit(y=y, X=x, params={"delta_rel_conv": 1e-9})
        coef = np.asarray(model.get_coef(format_pandas=False), dtype=float).ravel()
        cov = np.asarray(model.get_cov_pars(std_err=True, format_pandas=False), dtype=float)
        modes = np.asarray(model.predict_training_data_random_effects(), dtype=float)
    except (gpboost.basic.GPBoostError, ValueError) as exc:  # ValueError: input gpboost refuses
        return str(exc).strip()
    finally:
        logger.removeHandler(handler)
    return coef, cov[0], cov[1], modes.reshape(len(y), -1), handler.messages


def coefficient_covariance(
    x: np.ndarray, group_data: np.ndarray, coef: np.ndarray, variances: np.ndarray, modes: np.ndarray
) -> np.ndarray:
    """The covariance of the fixed effects from the Laplace approximation at the fit, given the
    variances: the fixed effects' block of the inverse of the joint curvature of the penalised
    log-likelihood in (fixed effects, random effects), [X'WX − X'WZ (Z'WZ + G⁻¹)⁻¹ Z'WX]⁻¹ with
    W = p(1 − p) at the mode (as lme4's Wald intervals). gpboost's own (``get_coef(std_err=True)``)
    came out NaN ("the approximated Hessian is not positive definite") in 3 of 6 simulated
    studies of 6,000 votes and 2.2 times too large in another. A term whose variance is 0 has
    no random effects to integrate over and is left out."""
    n = len(x)
    eta = x @ coef + modes.sum(axis=1)
    w = expit(eta) * (1.0 - expit(eta))
    blocks, precisions, offset = [], [], 0
    for j, variance in enumerate(variances):
        if variance <= VARIANCE_ZERO:
            continue
        levels = int(group_data[:, j].max()) + 1
        blocks.append(group_data[:, j] + offset)
        precisions.append(np.full(levels, 1.0 / variance))
        offset += levels
    xtwx = x.T @ (x * w[:, None])
    if not blocks:
        return np.linalg.inv(xtwx)
    rows = np.tile(np.arange(n), len(blocks))
    z = sparse.csc_matrix((np.ones(len(rows)), (rows, np.concatenate(blocks))), shape=(n, offset))
    ztw = z.T.multiply(w).tocsc()
    curvature = (ztw @ z + sparse.diags(np.concatenate(precisions))).tocsc()
    cross = ztw @ x
    return np.linalg.inv(xtwx - cross.T @ splu(curvature).solve(cross))


@judge_metric(
    "mixed_effects",
    Figure(
        "mixed_effect",
        "Effect, mixed model (log-odds)",
        "judges_against_people",
        NUMBER,
        "The perturbation's pull towards the perturbed answer in log-odds, with crossed random intercepts for"
        " rater and question (how much raters and questions differ is set aside); ties left out.",
        "decisive votes",
    ),
    Figure(
        "mixed_position",
        "Position, mixed model (log-odds)",
        "judges_against_people",
        NUMBER,
        "The pull towards the answer shown first in log-odds (±1 coding, as the position log-odds), in the same model.",
        "decisive votes",
    ),
    Figure(
        "mixed_sd_rater",
        "SD between raters",
        "judges_against_people",
        NUMBER,
        "How much raters differ: the standard deviation of the raters' intercepts in log-odds (people only; an"
        " LLM judge's repeated votes are draws of one judge).",
        "raters",
    ),
    Figure(
        "mixed_sd_question",
        "SD between questions",
        "judges_against_people",
        NUMBER,
        "How much questions differ: the standard deviation of the questions' intercepts in log-odds.",
        "questions",
    ),
)
def mixed_effects_rows(data: JudgeData) -> list[Row]:
    """The mixed model of the judge's counted votes (this module's doc): ``mixed_effect`` per
    perturbation group (log-odds towards the perturbed answer against the control; n: the
    group's decisive votes; no clusters: the intervals are the model's), ``mixed_position`` (log-odds towards the
    answer shown first; n: decisive votes in the fit), ``mixed_sd_rater`` (how much raters
    differ; n: raters) and ``mixed_sd_question`` (how much questions differ; n: questions), each
    with a 95% interval and, for the effects, the Wald test's p-value. Convention: the random
    terms fitted. Note: the sizes the fit stands on, or why a figure is missing."""
    if not len(data.votes) or not data.has_prefs:
        return []
    found = fit(data.votes, data.prefs[["item_id", "a1_root", "a2_root"]], data.groups)
    convention = f"{TIES}; random intercepts: {found.terms or 'none'}"
    fitted_note = "; ".join([found.summary, *found.warnings])
    where = {"convention": convention}

    def effect_row(metric: str, effect: Effect | None, note: str, **columns) -> Row:
        if effect is None:
            return row(data.judge, data.kind, metric, None, note=found.note or note, **where, **columns)
        return row(
            data.judge,
            data.kind,
            metric,
            effect.value,
            ci=effect.ci,
            p_value=effect.p_value,
            note=fitted_note if effect.se is not None else f"no standard error; {fitted_note}",
            **where,
            **columns,
        )

    def spread_row(metric: str, spread: Spread | None, n: int) -> Row:
        if spread is None or spread.value is None:
            note = found.note or (spread.note if spread else "")
            return row(data.judge, data.kind, metric, None, n=n, note=note, **where)
        note = "; ".join(part for part in (spread.note, fitted_note) if part)
        return row(data.judge, data.kind, metric, spread.value, ci=spread.ci, n=n, note=note, **where)

    out = [
        effect_row(
            "mixed_effect",
            found.effects.get(g),
            found.group_notes.get(g, ""),
            group=g,
            n=found.group_votes.get(g, 0),
        )
        for g in data.groups
    ]
    # No ``clusters``: the model's intervals are its own (the question's random intercept), not a
    # clustered variance; the note names the questions the fit stands on.
    out.append(effect_row("mixed_position", found.position, found.position_note, n=found.n_votes))
    out.append(spread_row("mixed_sd_rater", found.sd_rater, found.n_raters))
    out.append(spread_row("mixed_sd_question", found.sd_question, found.n_questions))
    return out
