"""Keep the submissions of every running Prolific study (or one) in step with Prolific's: what
the Prolific page's "Sync now" button and the worker's periodic job do (cron it where no worker
runs)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from prolific.client import ProlificError
from prolific.models import RUNNING, ProlificStudy
from prolific.services import prolific_submissions_sync


class Command(BaseCommand):
    help = "Sync the submissions of running Prolific studies (returned, timed-out or rejected ones free their raters' items)."

    def add_arguments(self, parser):
        parser.add_argument("--study", help="Slug of one study (default: every study whose Prolific study runs).")

    def handle(self, *args, study: str | None = None, **options) -> None:
        links = ProlificStudy.objects.select_related("study")
        links = links.filter(study__slug=study) if study else links.filter(status__in=RUNNING)
        if study and not links.exists():
            raise CommandError(f"the study {study!r} has no Prolific study")
        failed = 0
        for link in links:
            try:
                counts = prolific_submissions_sync(study=link.study)
            except ProlificError as exc:
                failed += 1
                self.stderr.write(f"{link.study.slug}: {exc}")
                continue
            if options["verbosity"]:
                self.stdout.write(
                    f"{link.study.slug}: {counts['submissions']} submissions, {counts['freed']} raters freed"
                )
        if failed:
            raise CommandError(f"{failed} Prolific stud{'y' if failed == 1 else 'ies'} could not be synced")
