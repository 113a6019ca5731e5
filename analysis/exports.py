"""CSV exports of a study: votes (full provenance), item preferences per judge, and metrics.

Each export is a generator of rows (first the header) so the commands and the dashboard stream
it the same way; ``csv_lines`` turns rows into CSV text. The votes export walks the database
with ``iterator()`` in chunks, so memory stays flat however many votes there are.

Text cells that a spreadsheet would run as a formula (starting with = + - @ tab or CR) get a
leading apostrophe. Numbers are written as numbers and left alone.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator

from analysis import loader, metrics, report, services
from analysis.frame import CONTROL, Filters, apply_filters
from annotations.models import Judge, Study, Vote
from judges.models import JudgeRun

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

VOTE_COLUMNS = [
    "study",
    "vote_id",
    "question_id",
    "bloom",
    "is_gold",
    "group",
    "perturbation_kind",
    "semantics",
    "item_id",
    "answer_a1_id",
    "answer_a2_id",
    "len_a1_words",
    "len_a2_words",
    "len_a1_chars",
    "len_a2_chars",
    "len_a1_bpe",
    "len_a2_bpe",
    "shown_first",
    "choice_shown",
    "choice",
    "not_familiar",
    "client_ms",
    "server_ms",
    "rater",
    "rater_flagged",
    "judge",
    "judge_kind",
    "backend",
    "model",
    "prompt_style",
    "label_scheme",
    "labels_swapped",
    "run_id",
    "round",
    "raw_output",
    "parse_status",
    "error",
    "prob_first",
    "prob_second",
    "prob_tie",
    "received_at",
]

# A judge's backend/model/prompt style: from the run's configuration snapshot (JudgeRun.config,
# written by the judges app when a run starts) when there is one, else from Judge.params.
_PROVENANCE = ("backend", "model", "prompt_style")


def neutralise(value: object) -> object:
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[list]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    for row in rows:
        yield writer.writerow([neutralise(v) for v in row])


def _run_fields() -> list[str]:
    return ["config"] if "config" in {f.name for f in JudgeRun._meta.get_fields()} else []


def votes_rows(study: Study, *, chunk_size: int = 2000) -> Iterator[list]:
    yield VOTE_COLUMNS
    run_fields = _run_fields()
    judges = {j.id: j for j in Judge.objects.filter(votes__item__study=study).distinct()}
    fields = [
        "id",
        "item__question__external_id",
        "item__question__bloom_level",
        "item__question__is_gold",
        "item__kind__slug",
        "item__kind__semantics",
        "item_id",
        "item__answer_a1__external_id",
        "item__answer_a2__external_id",
        "item__answer_a1__len_words",
        "item__answer_a2__len_words",
        "item__answer_a1__len_chars",
        "item__answer_a2__len_chars",
        "item__answer_a1__len_bpe",
        "item__answer_a2__len_bpe",
        "shown_first",
        "choice_shown",
        "choice",
        "not_familiar",
        "client_ms",
        "server_ms",
        "rater_id",
        "rater__flagged",
        "judge_id",
        "label_scheme",
        "labels_swapped",
        "run_id",
        "round",
        "raw_output",
        "parse_status",
        "error",
        "option_probs",
        "received_at",
        *[f"run__{f}" for f in run_fields],
    ]
    queryset = Vote.objects.filter(item__study=study).order_by("id").values_list(*fields)
    for row in queryset.iterator(chunk_size=chunk_size):
        rec = dict(zip(fields, row, strict=True))
        judge = judges[rec["judge_id"]]
        run_config = rec.get("run__config") or {}
        provenance = {f: run_config.get(f) or judge.params.get(f, "") for f in _PROVENANCE}
        probs = rec["option_probs"] or {}
        kind = rec["item__kind__slug"]
        yield [
            study.slug,
            rec["id"],
            rec["item__question__external_id"],
            rec["item__question__bloom_level"],
            rec["item__question__is_gold"],
            "gold" if rec["item__question__is_gold"] else (kind or CONTROL),
            kind or "",
            rec["item__kind__semantics"] or CONTROL,
            rec["item_id"],
            rec["item__answer_a1__external_id"],
            rec["item__answer_a2__external_id"],
            rec["item__answer_a1__len_words"],
            rec["item__answer_a2__len_words"],
            rec["item__answer_a1__len_chars"],
            rec["item__answer_a2__len_chars"],
            rec["item__answer_a1__len_bpe"],
            rec["item__answer_a2__len_bpe"],
            rec["shown_first"],
            rec["choice_shown"] or "",
            rec["choice"] or "",
            rec["not_familiar"],
            rec["client_ms"],
            rec["server_ms"],
            # Pseudonymous: the database id, never the platform's participant id.
            f"R{rec['rater_id']}" if rec["rater_id"] else "",
            bool(rec["rater__flagged"]),
            judge.name,
            judge.kind,
            provenance["backend"],
            provenance["model"],
            provenance["prompt_style"],
            rec["label_scheme"],
            rec["labels_swapped"],
            rec["run_id"],
            rec["round"],
            rec["raw_output"],
            rec["parse_status"],
            rec["error"],
            probs.get("first"),
            probs.get("second"),
            probs.get("tie"),
            rec["received_at"].isoformat(),
        ]


ITEM_COLUMNS = [
    "study",
    "item_id",
    "question_id",
    "bloom",
    "group",
    "semantics",
    "a1_root",
    "a2_root",
    "len_a1_words",
    "len_a2_words",
    "judge",
    "n_a1",
    "n_a2",
    "n_tie",
    "n",
    "score",
    "preference",
]


def items_rows(study: Study, *, filters: Filters | None = None) -> Iterator[list]:
    """Each judge's preference on each item, from the votes the filters count."""
    yield ITEM_COLUMNS
    frame = loader.study_frame(study)
    counted, _, _ = apply_filters(frame, filters or Filters())
    if counted.empty:
        return
    prefs = metrics.item_preferences(counted)
    external = frame.drop_duplicates("question_id").set_index("question_id")["question_ext"]
    prefs = prefs.sort_values(["item_id", "judge"])
    for r in prefs.itertuples(index=False):
        yield [
            study.slug,
            r.item_id,
            external.get(r.question_id, ""),
            r.bloom,
            r.group,
            r.semantics,
            r.a1_root,
            r.a2_root,
            r.len_a1_words,
            r.len_a2_words,
            r.judge,
            r.n_a1,
            r.n_a2,
            r.n_tie,
            r.n,
            r.score,
            metrics.PREF_LABEL[int(r.pref)],
        ]


METRIC_COLUMNS = ["study", "judge", "kind", "bloom", "metric", "group", "value", "ci_lo", "ci_hi", "n", "measure"]


def metric_records(result: dict) -> Iterator[list]:
    """The analysis report flattened to one row per figure (long format)."""
    study, measure = result["study"], result["measure"]
    for judge in [*result["judges"], result["random_judge"]]:
        name, kind = judge["judge"], judge["kind"]
        parts = [("", judge), *[(b, part) for b, part in judge.get("by_bloom", {}).items()]]
        for bloom, part in parts:
            for metric, key in (("asr", "asr"), ("accuracy", "accuracy")):
                for group, rate in part[key].items():
                    lo, hi = rate["ci"]
                    yield [study, name, kind, bloom, metric, group, rate["value"], lo, hi, rate["n"], ""]
            pos = part["position"]
            for share in ("first", "tie", "second", "diff"):
                ci = pos.get("ci", {}).get(share, [None, None])
                yield [study, name, kind, bloom, f"position_{share}", "", pos[share], ci[0], ci[1], pos["n"], ""]
        verbosity = judge.get("verbosity")
        if verbosity:
            lo, hi = verbosity["longer_wins_ci"]
            yield [study, name, kind, "", "longer_wins", "", verbosity["longer_wins"], lo, hi, verbosity["n"], measure]
            for b in verbosity["bins"]:
                label = f"{b['lo']}-{'' if b['hi'] is None else b['hi']}"
                yield [study, name, kind, "", "verbosity_bin", label, b["value"], None, None, b["n"], measure]
        for metric in ("lc_winrate", "raw_winrate", "lc_effect", "raw_effect"):
            for group, value in (judge.get(metric) or {}).items():
                lo, hi = judge.get(f"{metric}_ci", {}).get(group, (None, None))
                n = judge.get("lc_n", {}).get(group)
                yield [study, name, kind, "", metric, group, value, lo, hi, n, measure]
        yield from _label_and_position_records(study, name, kind, judge.get("label_and_position"))
    nf = result["human_nf_position"]
    for share in ("first", "tie", "second", "diff"):
        yield [study, "Human-NF", "human", "", f"position_{share}", "", nf[share], None, None, nf["n"], ""]


def _label_and_position_records(study: str, name: str, kind: str, found: dict | None) -> Iterator[list]:
    """Position and label effects in log-odds (group: the label scheme); a label effect that
    cannot be told from position is left out, as on the dashboard."""
    if not found:
        return
    effects = [("position_log_odds", "", found["position"])]
    effects += [("label_log_odds", scheme, e) for scheme, e in found["label"].items() if e["identifiable"]]
    for metric, group, effect in effects:
        if effect is not None:
            lo, hi = effect["ci"]
            yield [study, name, kind, "", metric, group, effect["log_odds"], lo, hi, found["n"], ""]


def metrics_rows(
    study: Study, *, filters: Filters | None = None, options: report.Options | None = None
) -> Iterator[list]:
    yield METRIC_COLUMNS
    yield from metric_records(services.study_analyze(study=study, filters=filters, options=options))


EXPORTS: dict[str, Callable[..., Iterator[list]]] = {
    "votes": votes_rows,
    "items": items_rows,
    "metrics": metrics_rows,
}
