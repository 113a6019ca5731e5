"""Shared argument handling for the analysis commands."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analysis import exports
from analysis.forms import FilterForm
from annotations.models import Study
from vote_imports import vote_import


def study_by_slug(slug: str) -> Study:
    try:
        return vote_import.study_for_votes(slug=slug)
    except vote_import.StudyNotFound as exc:
        raise CommandError(str(exc)) from None


def add_filter_arguments(parser: CommandParser) -> None:
    parser.add_argument("--min-ms", type=int, help="response-time threshold in ms (default: the study's)")
    parser.add_argument("--ms-per-word", type=int, help="plus this many ms per word of both answers")
    parser.add_argument("--include-not-familiar", action="store_true")
    parser.add_argument("--include-flagged", action="store_true", help="count votes of flagged raters")
    parser.add_argument("--bloom", action="append", default=[], help="only this Bloom level (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    parser.add_argument("--subset", action="append", default=[], help="only this subset of imported data (repeatable)")
    parser.add_argument("--since", help="votes received from (ISO date/time)")
    parser.add_argument("--until", help="votes received until (ISO date/time)")
    parser.add_argument("--measure", default="words", help="length measure: words, chars, bpe or spaces")
    parser.add_argument(
        "--verbosity-convention",
        help="how a vote scores for 'longer answer wins': tie_half (default) or blog (ties drawn with --seed)",
    )
    parser.add_argument("--bin-width", type=int, default=10)
    parser.add_argument(
        "--runs", help="LLM runs to count: latest (default: latest complete run per item), all, or ids like 3,5"
    )
    parser.add_argument(
        "--alt-raters", help="who the raters are, for the alt-test's epsilon: crowd (default, 0.1), skilled, expert"
    )
    parser.add_argument("--alt-epsilon", type=float, help="the alt-test's epsilon (default: by --alt-raters)")
    parser.add_argument("--alt-min-votes", type=int, help="alt-test: human votes an item needs (default 2)")
    parser.add_argument("--alt-min-items", type=int, help="alt-test: items a rater needs to be tested (default 30)")
    parser.add_argument(
        "--alt-reference",
        help="alt-test: score against raters (default: the share of the others agreeing) or dawid_skene",
    )
    parser.add_argument(
        "--ratings-anchor", help="the system at 1000 in the systems' ratings (default: the first in the study)"
    )
    parser.add_argument(
        "--ratings-bootstrap",
        help="the systems' ratings' intervals: resample prompts (default) or votes (Chatbot Arena's)",
    )


def filter_form(options: dict, study: Study) -> FilterForm:
    """The command's options parsed by the dashboard's form: one validation for both."""
    data = {
        "min_ms": options.get("min_ms"),
        "ms_per_word": options.get("ms_per_word"),
        "include_not_familiar": options.get("include_not_familiar"),
        "include_flagged": options.get("include_flagged"),
        "bloom": options.get("bloom") or [],
        "group": options.get("group") or [],
        "subset": options.get("subset") or [],
        "since": options.get("since"),
        "until": options.get("until"),
        "measure": options.get("measure"),
        "bin_width": options.get("bin_width"),
        "verbosity_convention": options.get("verbosity_convention"),
        "runs": options.get("runs"),
        "alt_raters": options.get("alt_raters"),
        "alt_epsilon": options.get("alt_epsilon"),
        "alt_min_votes": options.get("alt_min_votes"),
        "alt_min_items": options.get("alt_min_items"),
        "alt_reference": options.get("alt_reference"),
        "ratings_anchor": options.get("ratings_anchor"),
        "ratings_bootstrap": options.get("ratings_bootstrap"),
    }
    # Not "v not in (None, False)": 0 == False, and --min-ms 0 or --alt-epsilon 0 are values.
    data = {k: v for k, v in data.items() if v is not None and v is not False}
    form = FilterForm.for_study(data, study=study)
    if not form.is_valid():
        problems = "; ".join(f"--{k.replace('_', '-')}: {' '.join(v)}" for k, v in form.errors.items())
        raise CommandError(f"bad filter: {problems}")
    return form


class ExportCommand(BaseCommand):
    """export_votes / export_items / export_metrics: stream one export of analysis.exports."""

    export = ""  # key of analysis.exports.EXPORTS
    takes_filters = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("-o", "--output", required=True, help="CSV file to write, or - for standard output")
        if self.takes_filters:
            add_filter_arguments(parser)

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        filters = report_options = None
        if self.takes_filters:
            form = filter_form(options, study)
            filters, report_options = form.filters(), form.options()
        rows = exports.export_rows(self.export, study, filters=filters, options=report_options)
        lines = exports.csv_lines(rows)
        n = write_lines(lines, options["output"], self.stdout)
        if options["verbosity"] > 0 and options["output"] != "-":
            self.stderr.write(f"wrote {n - 1} {self.export} rows to {options['output']}")


def write_lines(lines, output: str, stdout) -> int:
    """Write to a temporary file first and move it into place, so a failure leaves no half file."""
    n = 0
    if output == "-":
        for line in lines:
            stdout.write(line, ending="")
            n += 1
        return n
    target = Path(output)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", suffix=".part")
    except OSError as exc:
        raise CommandError(f"{output}: cannot write there ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line)
                n += 1
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise CommandError(f"{output}: cannot write there ({exc.strerror})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n
