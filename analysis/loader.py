"""The database → votes frame (see analysis.frame). A handful of ``values_list`` queries, no
per-row model objects, joined in pandas."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pandas as pd
from django.db.models import Case, Q, QuerySet, TextField, When
from django.db.models.functions import Cast

from analysis import ratings
from analysis.frame import (
    CHOICES,
    COLUMNS,
    CONTROL,
    MEASURES,
    OPTIONAL_COLUMNS,
    STYLE_FEATURES,
    empty_frame,
    normalise,
    probability_columns,
)
from annotations.models import RESPONSE_MS, Answer, ComparisonItem, Judge, Rater, Study, Vote
from judges.models import JudgeRun


def answer_roots(study: Study) -> pd.DataFrame:
    """Every answer of the study with the original it derives from (following compounds built
    on other variants) and its cached lengths."""
    rows = list(study_answers(study).values_list("id", "derived_from_id", *(f"len_{m}" for m in MEASURES), "system"))
    parent = {a: p for a, p, *_ in rows}
    roots = {}
    for answer_id in parent:
        node, seen = answer_id, 0
        while parent.get(node) is not None and seen < 100:
            node, seen = parent[node], seen + 1
        roots[answer_id] = node
    frame = pd.DataFrame(rows, columns=["answer_id", "derived_from", *MEASURES, "system"])
    frame["root"] = frame["answer_id"].map(roots)
    return frame.set_index("answer_id")


def study_answers(study: Study) -> QuerySet[Answer]:
    """The study's answers unordered, as a lookup table is read: the models' ordering (question,
    whose is study then external id) joined the study and sorted every answer, and on PostgreSQL,
    through a server-side cursor planned for its first rows, with statistics that did not yet
    count a fresh import, took about a minute a fetch."""
    return Answer.objects.filter(question__study=study).order_by()


def answer_styles(study: Study) -> pd.DataFrame:
    """The style counts (analysis.ratings.style_counts) of the study's answers that name their
    system, indexed by answer id: only ratings of systems read them."""
    rows = study_answers(study).exclude(system="").values_list("id", "text")
    counts = {pk: ratings.style_counts(text) for pk, text in rows.iterator(chunk_size=2000)}
    return pd.DataFrame.from_dict(counts, orient="index", columns=list(STYLE_FEATURES), dtype=float)


def study_items(study: Study) -> pd.DataFrame:
    """One row per comparison item with its group, semantics, roots and lengths."""
    rows = list(
        ComparisonItem.objects.filter(study=study)
        .order_by()
        .values_list(  # a lookup table: no sort
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
            "question__prompt_key",
        )
    )
    columns = ["item_id", "question_id", "question_ext", "bloom", "is_gold", "group", "semantics", "a1_id", "a2_id"]
    items = pd.DataFrame(rows, columns=[*columns, "gold_label", "subset", "prompt_key"])
    items["cluster_id"] = cluster_ids(items.pop("prompt_key"), items["question_id"])
    items["group"] = items["group"].fillna(CONTROL)
    items["semantics"] = items["semantics"].fillna(CONTROL)
    answers = answer_roots(study)
    styles = answer_styles(study)
    for side in ("a1", "a2"):
        ids = items[f"{side}_id"]
        items[f"{side}_root"] = ids.map(answers["root"]).astype("int64") if len(items) else ids
        for m in MEASURES:
            items[f"len_{side}_{m}"] = ids.map(answers[m]).astype(float)
        items[f"{side}_system"] = ids.map(answers["system"]).fillna("").astype(str)
        for f in STYLE_FEATURES:
            items[f"style_{side}_{f}"] = ids.map(styles[f]).astype(float)
    items["words"] = (items["len_a1_words"] + items["len_a2_words"]).fillna(0).astype(np.int64)
    items["threshold_ms"] = threshold_ms(study, items["words"])
    return items


def cluster_ids(prompt_key: pd.Series, question_id: pd.Series) -> np.ndarray:
    """Each row's cluster (analysis.frame ``cluster_id``): the smallest question id among the
    questions of its prompt key, or its own question's id where it has none."""
    question_id = question_id.to_numpy(dtype=np.int64)
    keyed = (prompt_key != "").to_numpy()
    out = question_id.copy()
    if keyed.any():
        smallest = pd.Series(question_id[keyed]).groupby(prompt_key.to_numpy()[keyed]).transform("min")
        out[keyed] = smallest.to_numpy()
    return out


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
    "client_ms",
    "received_at",
    "label_scheme",
    "option_probs",
    "parse_status",
)


# Columns with a converter (booleans and dates on SQLite, JSON everywhere) make Django convert
# every row in Python: dates and probabilities are read as text and parsed in bulk, the three
# flags as one integer computed in SQL. ``choice`` is not read: the vote_choice_matches_order
# constraint makes it a function of the order shown and the choice as shown.
_AS_TEXT = ("received_at", "option_probs")
_FLAGS = {"not_familiar": 1, "labels_swapped": 2, "order_unknown": 4}
_FLAG_CONDITIONS = {
    "not_familiar": Q(not_familiar=True),
    "labels_swapped": Q(labels_swapped=True),
    "order_unknown": Q(meta__order_known=False),
}
# (shown_first, choice_shown) → choice, as the constraint has it.
_CHOICE = {("a1", "first"): "a1", ("a1", "second"): "a2", ("a2", "first"): "a2", ("a2", "second"): "a1"}


def study_votes(study: Study) -> pd.DataFrame:
    """The vote-level columns of the study's votes, in their default order (received_at, id)."""
    flags = sum(Case(When(condition, then=_FLAGS[name]), default=0) for name, condition in _FLAG_CONDITIONS.items())
    # client_ms: the browser's time capped at the server's (RESPONSE_MS), what the rules read.
    fields = [Cast(f, TextField()) if f in _AS_TEXT else RESPONSE_MS if f == "client_ms" else f for f in VOTE_FIELDS]
    # Unsorted: the database's sort of every vote (a temporary B-tree on SQLite) cost more than
    # sorting two columns here. The flags as text: Django converts an integer expression's
    # value per row, a text's not.
    rows = Vote.objects.filter(item__study=study).order_by().annotate(flags=Cast(flags, TextField()))
    votes = pd.DataFrame(list(rows.values_list("id", *fields, "flags")), columns=["vote_id", *VOTE_FIELDS, "flags"])
    votes["received_at"] = pd.to_datetime(votes["received_at"], utc=True, format="ISO8601")
    votes = _in_order(votes)
    bits = votes.pop("flags").astype(np.int64).to_numpy()
    votes["not_familiar"] = (bits & _FLAGS["not_familiar"]) > 0
    votes["labels_swapped"] = (bits & _FLAGS["labels_swapped"]) > 0
    votes["order_known"] = (bits & _FLAGS["order_unknown"]) == 0
    # Categories, as the frame has them: a column of a few values kept as small codes, not a
    # string object per vote.
    for col in _TEXT:
        votes[col] = votes[col].astype("category")
    votes["choice"] = _choices(votes["shown_first"].array, votes["choice_shown"].array)
    for col in ("rater_id", "run_id", "client_ms"):  # None where unknown: NaN
        votes[col] = votes[col].astype(float)
    for col, values in probability_columns(votes.pop("option_probs")).items():
        votes[col] = values
    return votes


_TEXT = ("shown_first", "choice_shown", "label_scheme", "parse_status")


def _choices(shown: pd.Categorical, said: pd.Categorical) -> pd.Categorical:
    """Each vote's choice from the order shown and the choice as shown, by their codes (a table
    of the few pairs there are, not a comparison of texts per vote)."""
    # One more row and column for a missing value (code -1): no choice.
    table = np.full((len(shown.categories) + 1, len(said.categories) + 1), -1, dtype=np.int8)
    for i, first in enumerate(shown.categories):
        for j, as_shown in enumerate(said.categories):
            meant = "tie" if as_shown == "tie" else _CHOICE.get((first, as_shown))
            table[i, j] = CHOICES.index(meant) if meant else -1
    return pd.Categorical.from_codes(table[shown.codes, said.codes], categories=list(CHOICES))


def _in_order(votes: pd.DataFrame) -> pd.DataFrame:
    """The votes in their default order, (received_at, id)."""
    # .values: datetime64 (to_numpy() of a zoned column gives one Timestamp object per vote).
    order = np.lexsort((votes["vote_id"].to_numpy(), votes["received_at"].values))
    if not (order != np.arange(len(order))).any():
        return votes
    return votes.take(order).reset_index(drop=True)


def imported_kind(kind: str, params: dict) -> str:
    """The kind the analysis names a judge by. Imported votes of people without rater ids (PRD's
    MTurk votes) count as human votes; those a vote file says came from an LLM or a simulated
    judge (the votes export's ``judge_kind``) keep that kind, so a study's votes exported and
    imported again are reported as before."""
    if kind != Judge.Kind.IMPORTED:
        return kind
    return "human" if params.get("people") else params.get("kind", kind)


def study_frame(study: Study) -> pd.DataFrame:
    votes = dict(study_votes(study).items())
    if not len(votes["vote_id"]):
        return empty_frame()
    judges = pd.DataFrame(
        [
            (pk, name, imported_kind(kind, params or {}))
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
    columns = {
        **votes,
        **_looked_up(votes["item_id"], study_items(study), "item_id", categories=("bloom", "group", "semantics")),
        **_looked_up(votes["judge_id"], judges, "judge_id", categories=("judge", "judge_kind")),
        # No rater (an LLM's vote): no name, not flagged.
        **_looked_up(votes["rater_id"], raters, "rater_id", missing={"rater": "", "rater_flagged": False}),
    }
    columns["parse_status"] = columns["parse_status"].astype(object)
    columns["run_complete"] = run_complete(
        pd.DataFrame({c: columns[c] for c in ("run_id", "item_id", "parse_status")}), study
    )
    # The frame's columns only, put together once (a join of whole frames, then a selection and
    # a copy, moved every column three times), as they are: with copy=True pandas would copy
    # them again into one 2-D block per dtype (0.45 s of a million votes' refresh), which the
    # analysis does not need. The columns are this call's own.
    return normalise(pd.DataFrame({c: columns[c] for c in [*COLUMNS, *OPTIONAL_COLUMNS]}, copy=False))


def _looked_up(
    keys: pd.Series, table: pd.DataFrame, key: str, categories: tuple[str, ...] = (), missing: dict | None = None
) -> dict[str, pd.Series]:
    """The other columns of ``table``'s row for each of ``keys`` (no row: NaN, or the column's
    value in ``missing``), in the keys' order: a left join on a unique key that copies the small
    table's columns, not the votes'. The ``categories`` columns come out categorical, with only
    the values the keys reach (as the frame's own ``astype("category")`` would make them), coded
    on the small table."""
    # Keys as floats: a column of ids with None in it (votes without a rater) is NaN there.
    positions = pd.Index(table[key].to_numpy()).get_indexer(keys.to_numpy(dtype=float))
    reached = np.zeros(len(table), dtype=bool)
    reached[positions[positions >= 0]] = True
    out = {}
    for col in table.columns.drop(key):
        values = table[col]
        if col in categories:  # the categories of the rows reached, found on the small table
            values = values.astype(pd.CategoricalDtype(pd.Categorical(values[reached]).categories)).array
        # allow_fill: position -1 (no row) gives NaN, as a left join does, or the column's ``missing``.
        taken = pd.api.extensions.take(
            values.to_numpy() if col not in categories else values,
            positions,
            allow_fill=True,
            fill_value=(missing or {}).get(col),
        )
        # Object columns as they are: a Series would look through a million texts for dates.
        out[col] = pd.Series(taken, dtype=object if taken.dtype == object else None, copy=False)
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
    ("client_ms", RESPONSE_MS),
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
