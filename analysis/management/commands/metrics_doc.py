"""Writes the metric list of docs/STATISTICS.md from the metric registry (analysis.metrics_doc)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from analysis import metrics_doc


def statistics_page() -> Path:
    return Path(settings.BASE_DIR) / "docs" / "STATISTICS.md"


class Command(BaseCommand):
    help = "Print the metric list of docs/STATISTICS.md made from the registry; --write rewrites it in the page."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--write", action="store_true", help="rewrite the page's marked block")
        parser.add_argument("--check", action="store_true", help="exit with an error if the page is out of date")

    def handle(self, *args, write: bool = False, check: bool = False, **options) -> None:
        page = statistics_page()
        text = page.read_text(encoding="utf-8")
        try:
            fresh = metrics_doc.rewritten(text)
        except ValueError as exc:
            raise CommandError(f"{page}: {exc}") from None
        if write:
            if fresh != text:
                page.write_text(fresh, encoding="utf-8")
            if options["verbosity"]:
                self.stdout.write(f"{page.name}: {'rewritten' if fresh != text else 'up to date'}")
        elif check:
            if fresh != text:
                raise CommandError(f"{page.name} is out of date: run {metrics_doc.COMMAND}")
        else:
            self.stdout.write(metrics_doc.metric_list())
