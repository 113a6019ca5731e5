"""The database → votes frame (see analysis.frame). A handful of ``values_list`` queries, no
per-row model objects, joined in pandas."""

from __future__ import annotations

import json
import operator
from functools import reduce
from itertools import islice

import numpy as np
import pandas as pd
from django.db.models import Case, Q, TextField, When
from django.db.models.functions import Cast

from analysis.frame import CHOICES, COLUMNS, CONTROL, OPTIONAL_COLUMNS, empty_frame, normalise
from annotations.models import Answer, ComparisonItem, Judge, Rater, Study, Vote
from judges.models import JudgeRun


def answer_roots(study: Study) -> pd.DataFrame:
    """Every answer of the study with the original it derives from (following compounds built
    on other variants) and its cached lengths."""
    rows = list(
        Answer.objects.filter(question__study=study).values_list(
            "id", "derived_from_id", "len_words", "len_chars", "len_bpe", "system"
        )
    )
    parent = {a: p for a, p, *_ in rows}
    roots = {}
    for answer_id in parent:
        node, seen = answer_id, 0
        while parent.get(node) is not None and seen < 100:
            node, seen = parent[node], seen + 1
        roots[answer_id] = node
    frame = pd.DataFrame(rows, columns=["answer_id", "derived_from", "words", "chars", "bpe", "system"])
    frame["root"] = frame["answer_id"].map(roots)
    return frame.set_index("answer_id")


def study_items(study: Study) -> pd.DataFrame:
    """One row per comparison item with its group, semantics, roots and lengths."""
    rows = list(
        ComparisonItem.objects.filter(study=study).values_list(
            "id",
            "question_id",
            "question__external_id",
            "question__bloom_level",
            "question__is_gold",
            "kind__slug",
            "kind__semantics",
            "answer_a1_id",
            "answer_a2_id",
            "gold_label",
            "question__subset",
        )
    )
    columns = ["item_id", "question_id", "question_ext", "bloom", "is_gold", "group", "semantics", "a1_id", "a2_id"]
    items = pd.DataFrame(rows, columns=[*columns, "gold_label", "subset"])
    items["group"] = items["group"].fillna(CONTROL)
    items["semantics"] = items["semantics"].fillna(CONTROL)
    answers = answer_roots(study)
    for side in ("a1", "a2"):
        ids = items[f"{side}_id"]
        items[f"{side}_root"] = ids.map(answers["root"]).astype("int64") if len(items) else ids
        for m in ("words", "chars", "bpe"):
            items[f"len_{side}_{m}"] = ids.map(answers[m]).astype(float)
        items[f"{side}_system"] = ids.map(answers["system"]).fillna("").astype(str)
    items["words"] = (items["len_a1_words"] + items["len_a2_words"]).fillna(0).astype(np.int64)
    items["threshold_ms"] = threshold_ms(study, items["words"])
    return items


def threshold_ms(study: Study, words: pd.Series) -> pd.Series:
    """The study's too-fast threshold for items of so many words (both answers)."""
    return (study.min_response_ms + study.ms_per_word * words).astype(float)


# Vote columns read into the frame under their own names (the vote's id becomes vote_id).
VOTE_FIELDS = (
    "item_id",
    "judge_id",
    "rater_id",
    "run_id",
    "shown_first",
    "choice_shown",
    "choice",
    "not_familiar",
    "client_ms",
    "received_at",
    "label_scheme",
    "option_probs",
    "labels_swapped",
    "parse_status",
)


# Columns with a converter (booleans and dates on SQLite, JSON everywhere) make Django convert
# every row in Python, which cost half the load of a 100,000-vote study: dates and probabilities
# are read as text and parsed in bulk, the flags as the ids of the (few) votes that have them.
_AS_TEXT = ("received_at", "option_probs")
# Flag → its bit in one small query over the flagged votes only.
_FLAGS = {"not_familiar": 1, "labels_swapped": 2, "order_unknown": 4}


def _vote_rows(study: Study) -> pd.DataFrame:
    study_votes = Vote.objects.filter(item__study=study)
    columns = ["vote_id", *(f for f in VOTE_FIELDS if f not in _FLAGS)]
    fields = [Cast(f, TextField()) if f in _AS_TEXT else f for f in columns[1:]]
    # Unsorted: the database's sort of every vote (a temporary B-tree on SQLite) cost more than
    # sorting two columns here, in the same order (the votes' default ordering).
    votes = pd.DataFrame(list(study_votes.order_by().values_list("id", *fields)), columns=columns)
    conditions = {"not_familiar": Q(not_familiar=True), "labels_swapped": Q(labels_swapped=True)}
    conditions["order_unknown"] = Q(meta__order_known=False)
    flags = sum(Case(When(condition, then=_FLAGS[name]), default=0) for name, condition in conditions.items())
    flagged = dict(
        study_votes.filter(reduce(operator.or_, conditions.values())).annotate(flags=flags).values_list("id", "flags")
    )
    votes["received_at"] = pd.to_datetime(votes["received_at"], utc=True, format="ISO8601")
    # .values: datetime64 (to_numpy() of a zoned column gives one Timestamp object per vote).
    order = np.lexsort((votes["vote_id"].to_numpy(), votes["received_at"].values))
    if (order != np.arange(len(order))).any():
        votes = votes.take(order).reset_index(drop=True)
    bits = votes["vote_id"].map(flagged).fillna(0).astype(np.int64).to_numpy() if flagged else 0
    votes["not_familiar"] = (bits & _FLAGS["not_familiar"]) > 0
    votes["labels_swapped"] = (bits & _FLAGS["labels_swapped"]) > 0
    votes["order_known"] = (bits & _FLAGS["order_unknown"]) == 0
    probs = votes["option_probs"]
    votes["option_probs"] = probs.where(probs.isna(), probs.dropna().map(json.loads)).astype(object)
    return votes


def study_frame(study: Study) -> pd.DataFrame:
    votes = _vote_rows(study)
    if votes.empty:
        return empty_frame()
    judges = pd.DataFrame(
        [
            # Imported votes of people without rater ids (PRD's MTurk votes) count as human votes.
            (pk, name, "human" if kind == Judge.Kind.IMPORTED and (params or {}).get("people") else kind)
            for pk, name, kind, params in Judge.objects.filter(id__in=votes["judge_id"].unique().tolist()).values_list(
                "id", "name", "kind", "params"
            )
        ],
        columns=["judge_id", "judge", "judge_kind"],
    )
    raters = pd.DataFrame(
        list(Rater.objects.filter(study=study).values_list("id", "participant_id", "flagged")),
        columns=["rater_id", "rater", "rater_flagged"],
    )
    # Nullable integers on both sides: when no vote so far has a rater (only LLM votes, raters
    # who entered but have not voted), the votes' column is all None and would not merge.
    votes["rater_id"] = votes["rater_id"].astype("Int64")
    raters["rater_id"] = raters["rater_id"].astype("Int64")
    columns = {
        **votes,
        **_looked_up(votes["item_id"], study_items(study), "item_id", categories=("bloom", "group", "semantics")),
        **_looked_up(votes["judge_id"], judges, "judge_id", categories=("judge", "judge_kind")),
        **_looked_up(votes["rater_id"], raters, "rater_id"),
    }
    columns["rater"] = columns["rater"].fillna("")
    columns["rater_flagged"] = columns["rater_flagged"].astype("boolean").fillna(False).astype(bool)
    columns["run_id"] = columns["run_id"].astype(float)
    columns["run_complete"] = run_complete(
        pd.DataFrame({c: columns[c] for c in ("run_id", "item_id", "parse_status")}), study
    )
    # The frame's columns only, put together once (a join of whole frames, then a selection and
    # a copy, moved every column three times).
    return normalise(pd.DataFrame({c: columns[c] for c in [*COLUMNS, *OPTIONAL_COLUMNS]}))


def _looked_up(keys: pd.Series, table: pd.DataFrame, key: str, categories: tuple[str, ...] = ()) -> pd.DataFrame:
    """The other columns of ``table``'s row for each of ``keys`` (missing: NaN), in the keys'
    order: a left join on a unique key that copies the small table's columns, not the votes'.
    The ``categories`` columns come out categorical, with only the values the keys reach (as
    the frame's own ``astype("category")`` would make them), coded on the small table."""
    table = table.astype({col: "category" for col in categories})
    out = table.set_index(key).reindex(keys.to_numpy()).reset_index(drop=True)
    for col in categories:
        out[col] = out[col].cat.remove_unused_categories()
    return out


def run_complete(frame: pd.DataFrame, study: Study) -> np.ndarray:
    """Per vote: True unless it belongs to a run that has fewer answered votes on its item than
    the run planned (its configuration's votes per item; failed requests do not count)."""
    run = frame["run_id"].to_numpy(dtype=float)
    has_run = ~np.isnan(run)
    out = np.ones(len(frame), dtype=bool)
    if not has_run.any():
        return out
    configs = JudgeRun.objects.filter(id__in=np.unique(run[has_run]).astype(int).tolist()).values_list("id", "config")
    planned = {rid: int((config or {}).get("votes_per_item") or study.votes_per_item) for rid, config in configs}
    sub = frame.loc[has_run, ["run_id", "item_id"]].assign(answered=(frame["parse_status"] != "failed")[has_run])
    answered = sub.groupby(["run_id", "item_id"])["answered"].transform("sum").to_numpy()
    out[has_run] = answered >= sub["run_id"].map(planned).to_numpy(dtype=float)
    return out


# What analysis.frame.exclusion_masks reads with a study's own settings (the default Filters),
# as (frame column, vote field): the few columns ``rules_frame`` loads.
_RULE_FIELDS = (
    ("vote_id", "id"),
    ("item_id", "item_id"),
    ("judge_id", "judge_id"),
    ("run_id", "run_id"),
    ("client_ms", "client_ms"),
    ("choice", "choice"),
    ("parse_status", "parse_status"),
    ("not_familiar", "not_familiar"),
    ("is_gold", "item__question__is_gold"),
    ("rater_flagged", "rater__flagged"),
    ("len_a1_words", "item__answer_a1__len_words"),
    ("len_a2_words", "item__answer_a2__len_words"),
)


_RULE_DTYPES = {
    "vote_id": np.int64,
    "item_id": np.int64,
    "judge_id": np.int64,
    "run_id": float,
    "client_ms": float,
    "not_familiar": bool,
    "is_gold": bool,
    "len_a1_words": float,
    "len_a2_words": float,
}


def rules_frame(study: Study, *, chunk_size: int = 10_000) -> pd.DataFrame:
    """Every vote of the study (in id order) with only the columns that decide whether the
    default analysis counts it, read in chunks into numbers and categories: tens of MB at a
    million votes, where ``study_frame`` takes gigabytes. For ``exclusion_masks`` with the
    default filters (no time range, Bloom level, group or subset: those read other columns)."""
    rows = Vote.objects.filter(item__study=study).order_by("id").values_list(*(f for _, f in _RULE_FIELDS))
    rows = rows.iterator(chunk_size=chunk_size)
    # Column by column, each chunk's column a copy of its own, so that every column's parts are
    # freed as it is joined: the votes are held once (~45 bytes each), not twice as in one concat.
    parts: dict[str, list[pd.Series]] = {}
    while batch := list(islice(rows, chunk_size)):
        for col, values in _rules_chunk(study, batch).items():
            parts.setdefault(col, []).append(values.copy())
    parts = parts or {col: [values] for col, values in _rules_chunk(study, []).items()}
    frame = pd.DataFrame(index=pd.RangeIndex(sum(len(s) for s in parts["vote_id"])))
    for col in list(parts):
        frame[col] = pd.concat(parts.pop(col), ignore_index=True)
    judge_ids = frame.pop("judge_id")
    names = dict(Judge.objects.filter(id__in=judge_ids.unique().tolist()).values_list("id", "name"))
    # Built from codes: a column of names, then categories, took more memory than the frame.
    judges = sorted(set(names.values()))
    codes = judge_ids.map({pk: judges.index(name) for pk, name in names.items()}).to_numpy()
    frame["judge"] = pd.Categorical.from_codes(codes, categories=judges)
    frame["run_complete"] = run_complete(frame, study)
    return frame


def _rules_chunk(study: Study, rows: list[tuple]) -> pd.DataFrame:
    chunk = pd.DataFrame(rows, columns=[c for c, _ in _RULE_FIELDS]).astype(_RULE_DTYPES)
    chunk["choice"] = pd.Categorical(chunk["choice"], categories=list(CHOICES))
    chunk["parse_status"] = pd.Categorical(chunk["parse_status"], categories=list(Vote.Parse.values))
    # No rater (an LLM's vote): not flagged.
    chunk["rater_flagged"] = chunk["rater_flagged"].astype("boolean").fillna(False).astype(bool)
    words = (chunk.pop("len_a1_words") + chunk.pop("len_a2_words")).fillna(0).astype(np.int64)
    chunk["threshold_ms"] = threshold_ms(study, words)
    return chunk
