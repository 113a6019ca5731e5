"""A simulated judge with set biases, voting on a study's items. Pure numpy/pandas.

Each vote is a tie with probability ``tie_rate``; otherwise it goes to A2 with probability
σ(u), where u (log-odds of A2 over A1) is

    quality(A2's original) − quality(A1's original)        # latent, sd ``noise`` per pair
    + susceptibility[group]                                 # pull towards the perturbed side
    + length_per_token · (len A2 − len A1)                  # in words
    ± position                                              # + when A2 is shown first
    ± label                                                 # + when A2 has the first label

so ``position`` > 0 favours the answer shown first, ``label`` > 0 the answer under the label
scheme's first label ("A"), and ``susceptibility`` < 0 means the judge sees through a degrading
perturbation. Orders are balanced: half the rounds show A1 first. A simulated LLM judge
(``counterbalance_labels``) follows the judges app's plan, label order counterbalanced against
display order as a real run is; otherwise (people, or LLM runs from before) the answer shown
first always has the first label, so ``label`` acts exactly as more ``position``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from analysis import stats
from judges.plan import item_rounds

# The label scheme a simulated LLM judge is taken to have seen.
SIMULATED_SCHEME = "ab"
DEFAULT_SUSCEPTIBILITY = {"factual_error": -2.0, "reference": 0.4, "rich_content": 0.6, "reference_rich_content": 0.8}


@dataclass
class JudgeParams:
    position: float = 0.0
    label: float = 0.0
    length_per_token: float = 0.0
    susceptibility: dict[str, float] = field(default_factory=dict)
    tie_rate: float = 0.1
    noise: float = 1.0
    # Response time (ms) of simulated people: lognormal around this median; None for machines.
    median_ms: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


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


def simulate_votes(
    items: pd.DataFrame,
    params: JudgeParams,
    *,
    votes_per_item: int,
    seed: int = 0,
    counterbalance_labels: bool = False,
) -> pd.DataFrame:
    """Votes on ``items`` (columns item_id, group, a1_root, a2_root, len_a1_words, len_a2_words):
    one row per vote with item_id, round, shown_first, labels_swapped, label_scheme,
    choice_shown, choice, client_ms."""
    rng = np.random.default_rng(seed)
    quality = draw_quality(items, params, rng)
    base = log_odds_a2(items, params, quality)
    n_items, k = len(items), votes_per_item
    item_idx = np.repeat(np.arange(n_items), k)
    rounds = np.tile(np.arange(k), n_items)
    if counterbalance_labels:
        plan = [
            p for i in range(n_items) for p in item_rounds(votes_per_item=k, schemes=[SIMULATED_SCHEME], item_index=i)
        ]
        a2_first = np.array([p.shown_first == "a2" for p in plan], dtype=bool)
        swapped = np.array([p.labels_swapped for p in plan], dtype=bool)
    else:
        # Balanced orders: alternate by round, starting side random per item (matters for odd k).
        start = rng.integers(0, 2, n_items)[item_idx]
        a2_first = ((rounds + start) % 2).astype(bool)
        swapped = np.zeros(len(a2_first), dtype=bool)
    a2_first_label = a2_first != swapped
    u = (
        base[item_idx]
        + np.where(a2_first, params.position, -params.position)
        + np.where(a2_first_label, params.label, -params.label)
    )
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
            "labels_swapped": swapped,
            "label_scheme": SIMULATED_SCHEME if counterbalance_labels else "",
            "choice_shown": choice_shown,
            "choice": choice,
            "client_ms": client_ms,
        }
    )


def score_distribution(n: int, p1: float, p2: float, pt: float) -> np.ndarray:
    """P(votes A1 − votes A2 = s) for s in −n..n after n independent votes, each A1 with
    ``p1``, A2 with ``p2`` and a tie with ``pt``."""
    dist = np.zeros(2 * n + 1)
    dist[n] = 1.0
    for _ in range(n):
        new = dist * pt
        new[1:] += dist[:-1] * p1
        new[:-1] += dist[1:] * p2
        dist = new
    return dist


SYNTHETIC_GROUPS = {
    "factual_error": ("degrading", 0),
    "reference": ("non_semantic", 15),
    "rich_content": ("non_semantic", 25),
}


def synthetic_items(n_questions: int, *, groups: dict | None = None, seed: int = 0) -> pd.DataFrame:
    """A made-up design: per question a control item and one item per perturbation group
    (``{slug: (semantics, words added)}``); the perturbed original alternates between the first
    and the second from one question to the next."""
    groups = SYNTHETIC_GROUPS if groups is None else groups
    rng = np.random.default_rng(seed)
    k = len(groups) + 1
    q = np.repeat(np.arange(n_questions), k)
    slot = np.tile(np.arange(k), n_questions)
    names = np.array(["control", *groups])
    sem = np.array(["control", *(s for s, _ in groups.values())])
    extra = np.array([0, *(e for _, e in groups.values())])
    lens = rng.integers(30, 120, (n_questions, 2))
    flip = (q % 2 == 1) & (slot > 0)
    o1, o2 = 2 * q, 2 * q + 1
    l1, l2 = lens[q, 0], lens[q, 1]
    return pd.DataFrame(
        {
            "item_id": q * k + slot,
            "question_id": q,
            "cluster_id": q,  # each question its own cluster (analysis.frame)
            "group": names[slot],
            "semantics": sem[slot],
            "a1_root": np.where(flip, o2, o1),
            "a2_root": np.where(flip, o1, o2),
            "len_a1_words": np.where(flip, l2, l1),
            "len_a2_words": np.where(flip, l1, l2) + extra[slot],
            "bloom": np.array(["remembering", "understanding", "applying", "analyzing", "evaluating", "creating"])[
                q % 6
            ],
        }
    )


def votes_frame(
    items: pd.DataFrame, votes: pd.DataFrame, *, judge: str = "sim", kind: str = "simulated"
) -> pd.DataFrame:
    """Simulated votes joined to their items as a complete votes frame (analysis.frame)."""
    from analysis.frame import COLUMNS, MEASURES, normalise

    df = votes.merge(items, on="item_id")
    n = len(df)
    df["vote_id"] = np.arange(n)
    df["question_ext"] = df["question_id"].astype(str)
    df["is_gold"] = False
    df["judge"], df["judge_kind"], df["rater"], df["rater_flagged"] = judge, kind, "", False
    df["run_id"], df["order_known"], df["not_familiar"] = np.nan, True, False
    df["threshold_ms"], df["words"] = 0.0, df["len_a1_words"] + df["len_a2_words"]
    df["received_at"] = pd.Timestamp("2025-01-01", tz="UTC")
    for col, missing in (("label_scheme", ""), ("labels_swapped", False)):
        if col not in df:
            df[col] = missing
    for m in MEASURES:
        if m != "words":
            df[f"len_a1_{m}"] = np.nan
            df[f"len_a2_{m}"] = np.nan
    # The items' clusters where they name them (analysis.frame's cluster_id), else each question's own.
    return normalise(df[[*COLUMNS, *(["cluster_id"] if "cluster_id" in df else [])]].copy())


@dataclass
class IntervalWidths:
    rows: list[dict]  # one per votes-per-item asked, as asr_interval_widths returns them
    votes_drawn: int  # how many votes the simulation drew: what it cost


def asr_interval_widths(
    *, n_questions: int, votes_per_item: list[int], params: JudgeParams, seed: int = 0, groups: dict | None = None
) -> list[dict]:
    """asr_interval_table's rows."""
    return asr_interval_table(
        n_questions=n_questions, votes_per_item=votes_per_item, params=params, seed=seed, groups=groups
    ).rows


def interval_width(rate: float, var: float, clusters: int) -> float:
    """The width of the interval the analysis gives a rate with this variance
    (stats.clustered_rates): Wilson's on the effective number of votes p(1 - p) / V, or on the
    clusters (questions) when the rate is 0 or 1 or the variance 0, so that a judge at 0 % still
    gets the interval the dashboard shows (with 6 questions [0 %, 39 %]), not one of width 0."""
    n_eff = rate * (1 - rate) / var if 0 < rate < 1 and var > 0 else float(clusters)
    lo, hi = stats.wilson(rate * n_eff, n_eff)
    return 1.0 if lo is None else hi - lo


def asr_interval_table(
    *, n_questions: int, votes_per_item: list[int], params: JudgeParams, seed: int = 0, groups: dict | None = None
) -> IntervalWidths:
    """How wide the 95% interval of each ASR is for a design of ``n_questions`` with k votes per
    item, for a judge like ``params``: the "how many votes do I need" question.

    The interval is for the judge's ASR on questions like these as its settled preferences
    would give it. Its variance has two parts (docs/STATISTICS.md, "How many votes"): the
    questions, and the votes (how far a question's reading from k votes strays). One study
    with 2h votes per item is simulated (h ≥ 12 and ≥ every k):

    - V_votes(k): two disjoint sets of k votes per item (rounds 0..k-1 and h..h+k-1) give two
      readings of each question; half their mean squared disagreement (cluster-robust, by
      question) is the variance k votes add;
    - V_questions: the cluster-robust variance of the whole study less what its 2h votes add
      (V_votes(h) / 2);
    - width(k): the width of the analysis's interval at variance V_questions + V_votes(k)
      (interval_width: Wilson's on the effective votes, about 2 × 1.96 × sqrt(V) when many,
      on the questions when the rate is 0 or 1), then the running minimum over k:
      whoever has k + 1 votes per item can use k of them, so more votes never need a wider
      interval (neighbours that go the other way are simulation noise or the tie rule: an
      even number of votes ties more often).

    Each row also has the ASR the analysis reports from the first k votes, and its base set.
    ``groups``: the design's perturbation groups as in ``synthetic_items`` (default: three)."""
    from analysis import metrics

    groups = SYNTHETIC_GROUPS if groups is None else groups
    items = synthetic_items(n_questions, groups=groups, seed=seed)
    semantics = {g: s for g, (s, _) in groups.items()}
    half = max(12, *votes_per_item)
    votes = simulate_votes(items, params, votes_per_item=2 * half, seed=seed + 1)
    rounds = votes["round"].to_numpy()
    item_pos = np.searchsorted(items["item_id"].to_numpy(), votes["item_id"].to_numpy())
    choice = votes["choice"].to_numpy()
    item_cols = items.assign(bloom="-")

    def parts(mask: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per question, ASR hit and base of each group, reading items from the votes in ``mask``."""
        n_a1 = np.bincount(item_pos[mask], weights=choice[mask] == "a1", minlength=len(items))
        n_a2 = np.bincount(item_pos[mask], weights=choice[mask] == "a2", minlength=len(items))
        prefs = item_cols.assign(pref=metrics.preference(n_a1, n_a2))
        ind = metrics.asr_indicators(metrics.oriented_pairs(prefs))
        out = {}
        for g in semantics:
            sub = ind[ind["group"] == g]
            q = sub["question_id"].to_numpy()
            out[g] = tuple(
                np.bincount(q, weights=sub[col].to_numpy(float), minlength=n_questions)
                for col in ("asr_hit", "asr_base")
            )
        return out

    def variance(hit: np.ndarray, base: np.ndarray, ratio: float, total: float) -> float:
        resid = hit - ratio * base
        return n_questions / (n_questions - 1) * float((resid * resid).sum()) / total**2

    def vote_variance(k: int, g: str, ratio: float, total: float) -> float:
        (hit_a, base_a), (hit_b, base_b) = blocks[k][0][g], blocks[k][1][g]
        gap = (hit_a - ratio * base_a) - (hit_b - ratio * base_b)
        return float((gap * gap).sum()) / 2 / total**2

    whole = parts(np.ones(len(votes), dtype=bool))
    ks = sorted(set(votes_per_item) | {half})
    blocks = {k: (parts(rounds < k), parts((rounds >= half) & (rounds < half + k))) for k in ks}
    widths: dict[str, dict[int, float | None]] = {}
    for g in semantics:
        hit, base = whole[g]
        total = float(base.sum())
        if total == 0 or n_questions < 2:
            widths[g] = {k: None for k in ks}
            continue
        ratio = float(hit.sum()) / total
        var_q = max(variance(hit, base, ratio, total) - vote_variance(half, g, ratio, total) / 2, 0.0)
        questions = int((base > 0).sum())
        narrowest = 1.0
        widths[g] = {}
        for k in ks:
            narrowest = min(narrowest, interval_width(ratio, var_q + vote_variance(k, g, ratio, total), questions))
            widths[g][k] = narrowest
    out = []
    for k in votes_per_item:
        row: dict = {"votes_per_item": k}
        for g in semantics:
            hit, base = blocks[k][0][g]
            n = int(base.sum())
            row[g] = {"value": float(hit.sum()) / n if n else None, "width": widths[g][k], "n": n}
        out.append(row)
    return IntervalWidths(rows=out, votes_drawn=len(votes))


@dataclass
class CrossedTruth:
    """A crossed design's truth (analysis.mixed_effects' model): each perturbation's effect
    towards the perturbed answer and the position effect (log-odds, ±1 coding), the SDs of the
    raters' and the questions' random intercepts, the intercept, and the tie rate."""

    effects: dict[str, float] = field(default_factory=lambda: {"factual_error": -1.0, "reference": 0.5})
    position: float = 0.3
    sd_rater: float = 0.8
    sd_question: float = 1.2
    intercept: float = 0.0
    tie_rate: float = 0.0


def crossed_votes(
    *, n_questions: int, n_raters: int, n_votes: int, truth: CrossedTruth, seed: int = 0, judge: str = "people"
) -> pd.DataFrame:
    """A votes frame (analysis.frame) of ``n_raters`` people voting ``n_votes`` times on the
    items of ``synthetic_items(n_questions)`` (a control and one item per effect's group; the
    perturbed original alternates between A2 and A1 from one question to the next), each vote a
    rater and an item drawn at random and an order drawn at random, drawn from the model of
    analysis.mixed_effects with ``truth``: the log-odds of taking the question's control A2 are
    intercept + rater + question ± effect (+ on the perturbed side) ± position (+ shown first)."""
    groups = {g: ("non_semantic", 0) for g in truth.effects}
    items = synthetic_items(n_questions, groups=groups, seed=seed)
    rng = np.random.default_rng(seed)
    rater_term = rng.normal(0.0, truth.sd_rater, n_raters)
    question_term = rng.normal(0.0, truth.sd_question, n_questions)
    rater = rng.integers(0, n_raters, n_votes)
    row = rng.integers(0, len(items), n_votes)
    a2_first = rng.random(n_votes) < 0.5
    picked = items.iloc[row]
    reference = 2 * picked["question_id"].to_numpy() + 1  # the control item's A2 (synthetic_items)
    reference_is_a2 = picked["a2_root"].to_numpy() == reference
    side = np.where(reference_is_a2, 1.0, -1.0)
    effect = picked["group"].map(lambda g: truth.effects.get(g, 0.0)).to_numpy(dtype=float)
    reference_first = a2_first == reference_is_a2
    u = (
        truth.intercept
        + rater_term[rater]
        + question_term[picked["question_id"].to_numpy()]
        + side * effect
        + np.where(reference_first, truth.position, -truth.position)
    )
    took_reference = rng.random(n_votes) < expit(u)
    tie = rng.random(n_votes) < truth.tie_rate
    chose_a2 = took_reference == reference_is_a2
    choice = np.where(tie, "tie", np.where(chose_a2, "a2", "a1"))
    took_first = chose_a2 == a2_first
    votes = pd.DataFrame(
        {
            "item_id": picked["item_id"].to_numpy(),
            "shown_first": np.where(a2_first, "a2", "a1"),
            "choice": choice,
            "choice_shown": np.where(tie, "tie", np.where(took_first, "first", "second")),
            "client_ms": np.full(n_votes, np.nan),
        }
    )
    frame = votes_frame(items, votes, judge=judge, kind="human")
    # An inner merge keeps the votes' order (votes_frame), so each vote's rater goes in by position.
    assert (frame["item_id"].to_numpy() == votes["item_id"].to_numpy()).all()
    frame["rater"] = pd.Categorical([f"R{r:04d}" for r in rater])
    return frame
