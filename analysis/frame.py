"""The votes frame every metric reads, and the filters applied to it.

One row per vote. The loader (``analysis.loader``) builds it from the database, where a vote
file's votes are too once imported (the vote_imports app); the maths in ``analysis.metrics`` and
``analysis.lc`` only reads it.

Columns (dtype):

- ``vote_id`` (int), ``question_id`` (int), ``question_ext`` (str), ``bloom`` (str),
  ``is_gold`` (bool), ``item_id`` (int), ``group`` ("control" or a perturbation slug),
  ``semantics`` ("control", "degrading" or "non_semantic");
- ``a1_root`` / ``a2_root`` (int): the original answer each side is (or derives from); they
  orient a perturbation's item against the question's control item;
- ``judge`` (str), ``judge_kind`` (human/llm/simulated/imported), ``rater`` (str, "" for none),
  ``rater_flagged`` (bool), ``run_id`` (float, NaN for none);
- ``shown_first`` ("a1"/"a2"), ``order_known`` (bool: False for imported votes whose source did
  not record the order), ``choice_shown`` (first/second/tie or None), ``choice`` (a1/a2/tie or
  None when the output could not be parsed);
- ``not_familiar`` (bool), ``client_ms`` (float, NaN unknown: the browser's time, at most the
  server's), ``threshold_ms`` (float: the study's threshold for this item), ``words`` (int:
  words of both answers), ``received_at`` (datetime, UTC);
- ``len_a1_<m>`` / ``len_a2_<m>`` (float, NaN unknown) for each measure m in ``MEASURES``;
- ``label_scheme`` (str);
- ``labels_swapped`` (bool): the answer shown first was under the scheme's second label. Always
  False for people (they see left and right, no labels) and for runs made before label order
  was counterbalanced, so label preference is only identifiable where it varies
  (``analysis.labels``).

Optional (``OPTIONAL_COLUMNS``, filled with the default when a loader has no such fact):

- ``run_complete`` (bool): the vote's run has every vote it planned on this item (True for
  votes without a run). The "latest" run filter prefers complete runs.
- ``parse_status`` (ok/invalid/failed): "invalid" votes asked for a verdict and got one that
  could not be read (they count as not correct against a gold label, analysis.consistency).
- ``gold_label`` ("a1"/"a2", "" unknown): the answer known to be better.
- ``subset`` (str, "" for none): the part of an imported data set the question comes from.
- ``cluster_id`` (int): the cluster of the vote's question in every interval and test: the
  question's own id, or, for the questions that share a prompt key (``Question.prompt_key``:
  several systems answering one instruction), the smallest id among them. Default: the
  question's id (each question its own cluster).
- ``a1_system`` / ``a2_system`` (str, "" unknown): the system that wrote each answer
  (``Answer.system``), for self-preference (``analysis.selfpref``).
- ``style_a1_<f>`` / ``style_a2_<f>`` (float, NaN unknown) for each style feature f of
  ``analysis.ratings.FEATURES`` (tokens, headers, lists, bold): each answer's counts as Chatbot
  Arena's style control reads them, for answers that name their system.
- ``prob_first`` / ``prob_second`` / ``prob_tie`` (float): the probability the judge put on
  each option as displayed (``Vote.option_probs``; an option it does not name 0), NaN for votes
  without probabilities (``probability_columns``). Numbers, not a dict per vote: a million
  dicts took about a second to average.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd

MEASURES = ("words", "chars", "bpe", "spaces")  # annotations.lengths
CHOICES = ("a1", "a2", "tie")
OPTIONS = ("first", "second", "tie")  # as displayed: Vote.choice_shown, Vote.option_probs
CONTROL = "control"
STYLE_FEATURES = ("tokens", "headers", "lists", "bold")  # analysis.ratings.FEATURES

COLUMNS = [
    "vote_id",
    "question_id",
    "question_ext",
    "bloom",
    "is_gold",
    "item_id",
    "group",
    "semantics",
    "a1_root",
    "a2_root",
    "judge",
    "judge_kind",
    "rater",
    "rater_flagged",
    "run_id",
    "shown_first",
    "order_known",
    "choice_shown",
    "choice",
    "not_familiar",
    "client_ms",
    "threshold_ms",
    "words",
    "received_at",
    "label_scheme",
    "labels_swapped",
] + [f"len_{side}_{m}" for m in MEASURES for side in ("a1", "a2")]

OPTIONAL_COLUMNS = {
    "run_complete": True,
    "parse_status": "ok",
    "gold_label": "",
    "subset": "",
    "a1_system": "",
    "a2_system": "",
    **{f"prob_{option}": np.nan for option in OPTIONS},
    **{f"style_{side}_{f}": np.nan for side in ("a1", "a2") for f in STYLE_FEATURES},
    "cluster_id": None,  # None: the question's id (normalise)
}

_CATEGORICAL = (
    "bloom",
    "group",
    "semantics",
    "judge",
    "judge_kind",
    "rater",
    "shown_first",
    "choice_shown",
    "label_scheme",
)


_CHOICE_DTYPE = pd.CategoricalDtype(list(CHOICES))
_FLAGS = ("is_gold", "rater_flagged", "order_known", "not_familiar", "labels_swapped", "run_complete")
_NUMBERS = (
    "client_ms",
    "threshold_ms",
    "run_id",
    *(f"prob_{o}" for o in OPTIONS),
    *(f"style_{side}_{f}" for side in ("a1", "a2") for f in STYLE_FEATURES),
) + tuple(c for c in COLUMNS if c.startswith("len_"))
_DTYPES = {**dict.fromkeys(_CATEGORICAL, "category"), **dict.fromkeys(_FLAGS, bool), **dict.fromkeys(_NUMBERS, float)}


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a frame built by any loader the dtypes the maths expects (in place where possible)."""
    for col, default in OPTIONAL_COLUMNS.items():
        if col not in frame.columns:
            frame[col] = default
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"votes frame lacks columns: {', '.join(missing)}")
    if frame["cluster_id"].dtype != np.int64:
        given = frame["cluster_id"].to_numpy(dtype=float)
        own = frame["question_id"].to_numpy(dtype=float)
        frame["cluster_id"] = np.where(np.isnan(given), own, given).astype(np.int64)
    # Only columns without their dtype are set again (setting a column copies it; the database
    # loader's columns have theirs already).
    for col, dtype in _DTYPES.items():
        if frame[col].dtype != dtype:
            frame[col] = frame[col].astype(dtype)
    if frame["choice"].dtype != _CHOICE_DTYPE:
        frame["choice"] = pd.Categorical(frame["choice"], categories=list(CHOICES))
    if frame["received_at"].dtype != "datetime64[ns, UTC]":  # the database loader's is already
        frame["received_at"] = pd.to_datetime(frame["received_at"], utc=True)
    return frame


def probability_columns(probs: pd.Series) -> dict[str, np.ndarray]:
    """``prob_first``/``prob_second``/``prob_tie`` from a column of each vote's option
    probabilities (dicts, or the JSON texts of dicts; missing for none): NaN where missing, 0
    for an option a dict does not name."""
    given = probs.notna().to_numpy()
    values = np.full((len(probs), len(OPTIONS)), np.nan)
    if given.any():
        dicts = list(probs[given])
        if isinstance(dicts[0], str):  # parsed in one call: a call per text took three times as long
            dicts = json.loads("[" + ",".join(dicts) + "]")
        table = pd.DataFrame.from_records(dicts, columns=list(OPTIONS))
        values[given] = table.astype(float).fillna(0.0).to_numpy()
    return {f"prob_{option}": values[:, i].copy() for i, option in enumerate(OPTIONS)}


def equals(column: pd.Series, value: str) -> np.ndarray:
    """``column == value`` per vote as a plain boolean array; on a categorical column (the frame's
    text columns) by its codes, without comparing a string per vote (a study of many judges
    compared each judge's columns that way many times)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        # The Categorical itself: ``.cat`` builds a Series of the codes at every call.
        categorical = column.array
        if value not in categorical.categories:
            return np.zeros(len(column), dtype=bool)
        return categorical.codes == categorical.categories.get_loc(value)
    return column.to_numpy(dtype=object) == value


def is_in(column: pd.Series, values: list[str]) -> np.ndarray:
    """``column.isin(values)`` as a plain boolean array, by the codes of a categorical column."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = column.array.categories
        return np.isin(column.array.codes, [categories.get_loc(v) for v in values if v in categories])
    return column.isin(values).to_numpy()


def by_judge(votes: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each judge's votes in their order, as iterating ``votes.groupby("judge", observed=True)``
    gives them, but as slices of one copy sorted by judge (no copy when sorted already)."""
    codes, names = pd.factorize(votes["judge"])
    if (codes[1:] < codes[:-1]).any():
        order = np.argsort(codes, kind="stable")
        votes, codes = votes.take(order), codes[order]
    # Votes without a judge (code -1) come first and belong to none.
    bounds = np.cumsum(np.bincount(codes + 1, minlength=len(names) + 1))
    return {str(name): votes.iloc[bounds[k] : bounds[k + 1]] for k, name in enumerate(names)}


def sorted_codes(column: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(column.to_numpy(dtype=object)[rows], sort=True)`` (codes in the sorted
    order of the values present, −1 for missing): for a categorical column from its codes,
    without hashing a string per vote."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return pd.factorize(column.to_numpy(dtype=object)[rows], sort=True)
    categorical = column.array
    codes = categorical.codes[rows].astype(np.intp)
    present = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(categorical.categories)))
    names = np.asarray(categorical.categories[present], dtype=object)
    order = np.argsort(names, kind="stable")
    recode = np.full(len(categorical.categories) + 1, -1, dtype=np.intp)  # the last slot: missing
    recode[present[order]] = np.arange(len(order))
    return recode[codes], names[order]


def empty_frame() -> pd.DataFrame:
    return normalise(pd.DataFrame({c: pd.Series(dtype=object) for c in [*COLUMNS, *OPTIONAL_COLUMNS]}))


RUNS = ("latest", "all")


@dataclass
class Filters:
    """Which votes count. Defaults follow SPEC: not-familiar votes and flagged raters out, the
    study's own response-time threshold. ``min_ms``/``ms_per_word`` replace the study's
    threshold (min_ms + ms_per_word × words of both answers) when given.

    ``runs``: which LLM runs count when a judge ran more than once on the study. "latest" (the
    default): per judge and item, the votes of its latest (highest id) run that completed the
    item, else of its latest run on the item; "all": every run; ``run_ids`` (when given, runs is
    "picked"): only those runs. Votes without a run (people, simulated and imported judges)
    are never touched by it.
    """

    min_ms: int | None = None
    ms_per_word: int | None = None
    include_not_familiar: bool = False
    include_flagged: bool = False
    blooms: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    # Subsets of an imported data set (Question.subset, e.g. LLMBar's); empty: every vote.
    subsets: list[str] = field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    runs: str = "latest"
    run_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        out = asdict(self)
        for key in ("since", "until"):
            if out[key] is not None:
                out[key] = out[key].isoformat()
        if self.run_ids:
            out["runs"] = "picked"
        return out


def exclusion_masks(frame: pd.DataFrame, filters: Filters) -> dict[str, np.ndarray]:
    """Each filter's own verdict on every vote (True: this filter leaves the vote out), in the
    order ``apply_filters`` applies them. A vote may be hit by several; the votes CSV lists them all."""
    none = np.zeros(len(frame), dtype=bool)
    return {
        "other_run": _not_selected_run(frame, filters),
        "gold": frame["is_gold"].to_numpy(),
        "time_range": _outside_range(frame, filters),
        "bloom": ~frame["bloom"].isin(filters.blooms).to_numpy() if filters.blooms else none,
        "group": ~frame["group"].isin(filters.groups).to_numpy() if filters.groups else none,
        "subset": ~frame["subset"].isin(filters.subsets).to_numpy() if filters.subsets else none,
        "flagged_rater": none if filters.include_flagged else frame["rater_flagged"].to_numpy(),
        "too_fast": _too_fast(frame, filters),
        "not_familiar": none if filters.include_not_familiar else frame["not_familiar"].to_numpy(),
        "no_choice": frame["choice"].isna().to_numpy(),
    }


def apply_filters(
    frame: pd.DataFrame, filters: Filters, *, drop_no_choice: bool = True
) -> tuple[pd.DataFrame, dict[str, int], pd.DataFrame]:
    """Return (counted votes, votes excluded by each filter, not-familiar votes that passed the
    other filters). Filters apply in the order of the returned dict, so each count is what that
    filter removed from what the earlier ones left; together they add up to every vote not
    counted. Nothing is dropped silently: unparsed votes and attention checks have their own rows.
    ``drop_no_choice=False`` keeps the votes without a choice (accuracy against a gold label
    counts an unreadable verdict as not correct).
    """
    excluded: dict[str, int] = {}
    keep = np.ones(len(frame), dtype=bool)
    not_familiar = frame.iloc[0:0]
    for name, mask in exclusion_masks(frame, filters).items():
        if name == "not_familiar":
            # Not-familiar votes leave the metrics but feed the Human-NF row, so they are split
            # off before votes without a choice are counted (a not-familiar vote may carry no choice).
            not_familiar = frame[keep & frame["not_familiar"].to_numpy()]
        if name == "no_choice" and not drop_no_choice:
            mask = np.zeros(len(frame), dtype=bool)
        hit = keep & mask
        excluded[name] = int(hit.sum())
        keep = keep & ~mask
    # When every vote counts, the frame itself (read only, as every caller does): a copy of all
    # its columns is a noticeable part of analysing a million votes.
    return (frame if keep.all() else frame[keep]), excluded, not_familiar


def _not_selected_run(frame: pd.DataFrame, filters: Filters) -> np.ndarray:
    run = frame["run_id"].to_numpy(dtype=float)
    has_run = ~np.isnan(run)
    if not has_run.any() or (filters.runs == "all" and not filters.run_ids):
        return np.zeros(len(frame), dtype=bool)
    if filters.run_ids:
        return has_run & ~np.isin(run, np.asarray(filters.run_ids, dtype=float))
    # Latest complete run per (judge, item): complete runs rank above every incomplete one.
    score = run[has_run] + np.where(frame["run_complete"].to_numpy()[has_run], 2.0**52, 0.0)
    keys = pd.DataFrame(
        {"j": frame["judge"].cat.codes.to_numpy()[has_run], "i": frame["item_id"].to_numpy()[has_run], "s": score}
    )
    best = keys.groupby(["j", "i"], sort=False)["s"].transform("max").to_numpy()
    out = np.zeros(len(frame), dtype=bool)
    out[has_run] = score != best
    return out


def _too_fast(frame: pd.DataFrame, filters: Filters) -> np.ndarray:
    if filters.min_ms is None and filters.ms_per_word is None:
        threshold = frame["threshold_ms"].to_numpy()
    else:
        threshold = (filters.min_ms or 0) + (filters.ms_per_word or 0) * frame["words"].to_numpy(dtype=float)
    client = frame["client_ms"].to_numpy()
    with np.errstate(invalid="ignore"):
        return ~np.isnan(client) & (client < threshold)


def _outside_range(frame: pd.DataFrame, filters: Filters) -> np.ndarray:
    out = np.zeros(len(frame), dtype=bool)
    if filters.since is not None:
        out |= (frame["received_at"] < pd.Timestamp(filters.since)).to_numpy()
    if filters.until is not None:
        out |= (frame["received_at"] > pd.Timestamp(filters.until)).to_numpy()
    return out
