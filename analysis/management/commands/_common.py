"""Shared argument handling for the analysis commands."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from analysis.forms import FilterForm
from annotations.models import Study


def study_by_slug(slug: str) -> Study:
    try:
        return Study.objects.get(slug=slug)
    except Study.DoesNotExist:
        raise CommandError(f"no study with slug {slug!r}") from None


def add_filter_arguments(parser: CommandParser) -> None:
    parser.add_argument("--min-ms", type=int, help="response-time threshold in ms (default: the study's)")
    parser.add_argument("--ms-per-word", type=int, help="plus this many ms per word of both answers")
    parser.add_argument("--include-not-familiar", action="store_true")
    parser.add_argument("--include-flagged", action="store_true", help="count votes of flagged raters")
    parser.add_argument("--bloom", action="append", default=[], help="only this Bloom level (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    parser.add_argument("--since", help="votes received from (ISO date/time)")
    parser.add_argument("--until", help="votes received until (ISO date/time)")
    parser.add_argument("--measure", default="words", help="length measure: words, chars or bpe")
    parser.add_argument("--bin-width", type=int, default=10)


def filter_form(options: dict, groups: list[str]) -> FilterForm:
    """The command's options parsed by the dashboard's form: one validation for both."""
    data = {
        "min_ms": options.get("min_ms"),
        "ms_per_word": options.get("ms_per_word"),
        "include_not_familiar": options.get("include_not_familiar"),
        "include_flagged": options.get("include_flagged"),
        "bloom": options.get("bloom") or [],
        "group": options.get("group") or [],
        "since": options.get("since"),
        "until": options.get("until"),
        "measure": options.get("measure"),
        "bin_width": options.get("bin_width"),
    }
    form = FilterForm({k: v for k, v in data.items() if v not in (None, False)}, groups=groups)
    if not form.is_valid():
        problems = "; ".join(f"--{k.replace('_', '-')}: {' '.join(v)}" for k, v in form.errors.items())
        raise CommandError(f"bad filter: {problems}")
    return form
