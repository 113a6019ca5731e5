"""CSV exports of a study: votes (full provenance, and whether the analysis counts each one),
item preferences per judge, metrics, the rater monitor, and the payment file.

Every export but the payment file names raters by a pseudonym (R<database id>); the payment
file is the one that carries platform participant ids, because a platform pays by them.

Each export is a generator of rows (first the header) so the commands and the dashboard stream
it the same way; ``csv_lines`` turns rows into CSV text. The votes export walks the database
with ``iterator()`` in chunks, so memory stays flat however many votes there are; what counts is
decided beforehand on a few small columns of every vote (``loader.rules_frame``, ~45 bytes a vote).

Text cells that a spreadsheet would run as a formula (starting with = + - @ tab or CR) get a
leading apostrophe. Numbers are written as numbers and left alone.
"""

from __future__ import annotations

import csv
import itertools
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal

import numpy as np
from django.db.models import OuterRef, Subquery
from django.http import StreamingHttpResponse

from analysis import compute, current_report, loader, metrics, rater_monitor, stored_reports
from analysis import rows as metric_table
from analysis.frame import CONTROL, Filters, apply_filters, exclusion_masks
from annotations.models import Judge, Study, Vote, is_attention_check_flag, pseudonym
from judges.models import JudgeRun

# What a spreadsheet may read as the start of a formula: = + - @ (and their full-width and small
# forms, which Excel reads as the same with a CJK input method: "＝1+1"), a tab or a carriage
# return (CSV injection, OWASP). The forms are found by NFKC, which folds each onto its ASCII sign.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

VOTE_COLUMNS = [
    "study",
    "vote_id",
    "question_id",
    "prompt_key",
    "bloom",
    "is_gold",
    "group",
    "perturbation_kind",
    "semantics",
    "item_id",
    "answer_a1_id",
    "answer_a2_id",
    "a2_original_id",
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
    "counted",
    "excluded_because",
    "late",
]

# Why the analysis (with the study's own settings: the dashboard's default filters) leaves a
# vote out, by analysis.frame filter. A late vote (one that arrived after its lease expired) is
# kept and counted, so "late" is a column of its own, not a reason.
REASONS = {
    "other_run": "other_run",
    "gold": "attention_check_item",
    "time_range": "outside_time_range",
    "bloom": "other_bloom",
    "group": "other_group",
    "flagged_rater": "flagged_rater",
    "too_fast": "too_fast",
    "not_familiar": "not_familiar",
    "no_choice": "no_choice",
}

# A judge's backend/model/prompt style: from the run's configuration snapshot (JudgeRun.config,
# written by the judges app when a run starts) when there is one, else from Judge.params.
_PROVENANCE = ("backend", "model", "prompt_style")


def neutralise(value: object) -> object:
    """A text cell a spreadsheet would run as a formula, with a quote put before it."""
    if isinstance(value, str) and value and unicodedata.normalize("NFKC", value[0]).startswith(FORMULA_START):
        return "'" + value
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[list]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    for row in rows:
        yield writer.writerow([neutralise(v) for v in row])


def exclusions(study: Study) -> dict[int, list[str]]:
    """Vote id → every reason the default analysis (the study's own settings) leaves it out
    (votes it counts are absent). The analysis's own rules (``exclusion_masks``) run on the few
    columns they read (``loader.rules_frame``), not on the whole study frame."""
    frame = loader.rules_frame(study)
    ids = frame["vote_id"].to_numpy()
    out: dict[int, list[str]] = {}
    for name, mask in exclusion_masks(frame, Filters()).items():
        for vote_id in ids[np.flatnonzero(mask)]:
            out.setdefault(int(vote_id), []).append(REASONS[name])
    return out


def _reasons(found: list[str], flag_reason: str | None) -> str:
    """A flagged rater who failed their attention checks is named as such."""
    if is_attention_check_flag(flag_reason):
        found = ["failed_attention_checks" if r == "flagged_rater" else r for r in found]
    return ";".join(found)


def votes_rows(study: Study, *, chunk_size: int = 2000) -> Iterator[list]:
    """Every vote; ``counted`` and ``excluded_because`` say what the dashboard's default
    analysis (the study's own thresholds) does with it."""
    yield VOTE_COLUMNS
    excluded = exclusions(study)
    judges = {j.id: j for j in Judge.objects.filter(votes__item__study=study).distinct()}
    fields = [
        "id",
        "item__question__external_id",
        "item__question__prompt_key",
        "item__question__bloom_level",
        "item__question__is_gold",
        "item__kind__slug",
        "item__kind__semantics",
        "item_id",
        "item__answer_a1__external_id",
        "item__answer_a2__external_id",
        "item__answer_a2__derived_from__external_id",
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
        "rater__flag_reason",
        "meta",
    ]
    # A vote names its run by id (Vote.run_id): the run's configuration comes in the same query.
    run_config = Subquery(JudgeRun.objects.filter(pk=OuterRef("run_id")).values("config")[:1])
    fields.append("run_config")
    queryset = (
        Vote.objects.filter(item__study=study).annotate(run_config=run_config).order_by("id").values_list(*fields)
    )
    for row in queryset.iterator(chunk_size=chunk_size):
        rec = dict(zip(fields, row, strict=True))
        judge = judges[rec["judge_id"]]
        run_config = rec["run_config"] or {}
        provenance = {f: run_config.get(f) or judge.params.get(f, "") for f in _PROVENANCE}
        probs = rec["option_probs"] or {}
        kind = rec["item__kind__slug"]
        yield [
            study.slug,
            rec["id"],
            rec["item__question__external_id"],
            rec["item__question__prompt_key"],
            rec["item__question__bloom_level"],
            rec["item__question__is_gold"],
            "gold" if rec["item__question__is_gold"] else (kind or CONTROL),
            kind or "",
            rec["item__kind__semantics"] or CONTROL,
            rec["item_id"],
            rec["item__answer_a1__external_id"],
            rec["item__answer_a2__external_id"],
            rec["item__answer_a2__derived_from__external_id"] or "",  # A2's original, for a perturbation
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
            pseudonym(rec["rater_id"]),
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
            rec["id"] not in excluded,
            _reasons(excluded.get(rec["id"], []), rec["rater__flag_reason"]),
            bool((rec["meta"] or {}).get("assignment", {}).get("late", False)),
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


# The metric table itself (analysis.rows): one CSV row per report row, in the report's order.
METRIC_COLUMNS = ["study", *metric_table.COLUMNS]


def metric_records(result: dict) -> Iterator[list]:
    """The report's metric table, each row led by the study. p-values (``p_value``,
    ``p_adjusted``) are numbers here, not the "< 0.001" the pages print: a CSV is read by
    programs."""
    for row in result["rows"]:
        yield [result["study"], *(row[c] for c in metric_table.COLUMNS)]


def metrics_rows(
    study: Study, *, filters: Filters | None = None, options: compute.Options | None = None, wait: bool = True
) -> Iterator[list]:
    """The report's metrics as CSV rows. ``wait=False`` (the web's downloads): a big study's
    last report while its next is computed, and ``stored_reports.ReportNotReady`` raised here, before
    any row, when it has none yet."""
    result = current_report.study_results(study=study, filters=filters, options=options, wait=wait).report
    if result is None:
        raise stored_reports.ReportNotReady(study.slug)
    return itertools.chain([METRIC_COLUMNS], metric_records(result))


RATER_COLUMNS = [
    "study",
    "rater",
    "status",
    "votes",
    "counted_votes",
    "target",
    "too_fast",
    "not_familiar",
    "median_ms",
    "total_seconds",
    "left_share",
    "votes_tied",
    "attention_checks_correct",
    "attention_checks_seen",
    "flagged",
    "flag_reason",
    "reliability",
    "reliability_labels",
]


def raters_rows(study: Study) -> Iterator[list]:
    """The rater monitor as CSV, raters under their pseudonym (R<id>) as in the votes CSV."""
    yield RATER_COLUMNS
    for r in rater_monitor.raters_monitor(study=study):
        rater = r["rater"]
        yield [
            *(study.slug, rater.pseudonym, r["status"], r["votes"], r["counted"], rater.target, r["too_fast"]),
            *(r["not_familiar_votes"], r["median_ms"], r["total_seconds"], r["left"], r["tie"]),
            *(rater.gold_correct, rater.gold_seen, rater.flagged, rater.flag_reason),
            *(r["reliability"], r["reliability_n"]),
        ]


PAYMENT_COLUMNS = [
    "participant_id",
    "rater",
    "source",
    "status",
    "votes",
    "counted_votes",
    "total_seconds",
    "attention_check_score",
    "attention_checks",
    "completion_code",
    "suggested_action",
    "bonus",
    "suggested_because",
]


def payment_rows(study: Study, *, bonus_per_counted_vote: Decimal = Decimal("0")) -> Iterator[list]:
    """One row per rater for the platform's bulk approve / reject and bonus pages: the
    participant id (the platform's own: this is the one export that carries it), what they did,
    and a suggested action (rater_monitor.suggested_action). Approved raters get
    ``bonus_per_counted_vote`` for each counted vote."""
    yield PAYMENT_COLUMNS
    for r in rater_monitor.raters_monitor(study=study):
        rater, action = r["rater"], r["action"]
        bonus = rater_bonus(r, bonus_per_counted_vote)
        yield [
            rater.participant_id,
            rater.pseudonym,
            rater.source,
            r["status"],
            r["votes"],
            r["counted"],
            r["total_seconds"],
            round(r["gold"], 3) if r["gold"] is not None else "",
            f"{rater.gold_correct}/{rater.gold_seen}",
            rater.completion_code,
            action,
            f"{bonus}",
            r["action_because"],
        ]


def rater_bonus(row: dict, bonus_per_counted_vote: Decimal) -> Decimal:
    """One rater's bonus, from their rater monitor row: per counted vote, for raters suggested
    for approval only, in cents."""
    if row["action"] != "approve":
        return Decimal("0.00")
    return (bonus_per_counted_vote * row["counted"]).quantize(Decimal("0.01"))


def bonus_preview(rows: list[dict], bonus_per_counted_vote: Decimal) -> dict:
    """What a bonus per counted vote pays, from the rater monitor's rows: how many raters get
    one and the total, in all (the payment file) and for Prolific's raters (the bulk bonus list)."""
    paid = [(row, rater_bonus(row, bonus_per_counted_vote)) for row in rows]
    paid = [(row, bonus) for row, bonus in paid if bonus > 0]
    prolific = [bonus for row, bonus in paid if row["rater"].source == "prolific"]
    return {
        "per_vote": bonus_per_counted_vote,
        "raters": len(paid),
        "total": sum((bonus for _, bonus in paid), Decimal("0.00")),
        "prolific_raters": len(prolific),
        "prolific_total": sum(prolific, Decimal("0.00")),
    }


# What Prolific's bulk pages take pasted in, from the payment file's rows of Prolific raters.
PASTE_LISTS = {
    "approve": "the participant ids suggested for approval, one per line (Prolific: Bulk approve)",
    "bonus": "participant_id,amount for every bonus above 0, one per line (Prolific: Bulk bonus payment)",
}


def payment_paste(study: Study, shape: str, *, bonus_per_counted_vote: Decimal = Decimal("0")) -> str:
    """One of ``PASTE_LISTS`` as text: the lines to paste into Prolific's bulk approve or bulk
    bonus page, for the raters who came from Prolific (the rest are in the payment file)."""
    if shape not in PASTE_LISTS:
        raise ValueError(f"no paste list {shape!r}: choose one of {', '.join(PASTE_LISTS)}")
    rows = payment_rows(study, bonus_per_counted_vote=bonus_per_counted_vote)
    header = next(rows)
    lines = []
    for row in map(lambda values: dict(zip(header, values, strict=True)), rows):
        if row["source"] != "prolific":
            continue
        if shape == "approve" and row["suggested_action"] == "approve":
            lines.append(row["participant_id"])
        elif shape == "bonus" and Decimal(row["bonus"]) > 0:
            lines.append(f"{row['participant_id']},{row['bonus']}")
    return "".join(f"{line}\n" for line in lines)


EXPORTS: dict[str, Callable[..., Iterator[list]]] = {
    "votes": votes_rows,
    "items": items_rows,
    "metrics": metrics_rows,
    "raters": raters_rows,
}
# Exports read the whole study as it is, with no dashboard filters.
UNFILTERED = {"votes", "raters"}


def export_rows(
    name: str,
    study: Study,
    *,
    filters: Filters | None = None,
    options: compute.Options | None = None,
    wait: bool = True,
) -> Iterator[list]:
    """The rows of the export ``name`` (a key of ``EXPORTS``), given the filters and report
    options where that export takes them (the dashboard, the API and the export_* commands all
    read an export through here). ``wait=False`` (the web): ``stored_reports.ReportNotReady`` rather
    than computing a big study's first metrics in the request."""
    kwargs: dict = {}
    if name not in UNFILTERED:
        kwargs["filters"] = filters
        if name == "metrics":
            kwargs.update(options=options, wait=wait)
    return EXPORTS[name](study, **kwargs)


def csv_response(rows: Iterable[list], filename: str) -> StreamingHttpResponse:
    """Rows streamed as a CSV download named ``filename``."""
    response = StreamingHttpResponse(csv_lines(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def export_download(
    name: str, study: Study, *, filters: Filters | None = None, options: compute.Options | None = None
) -> StreamingHttpResponse:
    """The export ``name`` as the web downloads it (the dashboard's link and the API): never
    waiting for a first report (``stored_reports.ReportNotReady``, raised before any byte is sent)."""
    rows = export_rows(name, study, filters=filters, options=options, wait=False)
    return csv_response(rows, f"{study.slug}-{name}.csv")


# What reading each output needs (biasstudy.permissions): the dashboard and the API check these.
# The metrics, figures and item preferences are computed from the votes; the rater monitor and
# the payment file show raters, the payment file by their platform ids.
METRICS_PERMISSIONS = ("annotations.view_study", "annotations.view_vote")
EXPORT_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "votes": ("annotations.view_vote",),
    "items": ("annotations.view_comparisonitem", "annotations.view_vote"),
    "metrics": METRICS_PERMISSIONS,
    "raters": ("annotations.view_rater",),
}
PAYMENT_PERMISSIONS = ("annotations.view_rater",)
