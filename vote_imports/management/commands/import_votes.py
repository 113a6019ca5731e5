"""python manage.py import_votes PATH... --format csv|mtbench|prd|llmbar|alpaca_eval --study S (formats:
vote_imports.importers.FORMATS; several paths for alpaca_eval only).

The task worker's job for a file uploaded in the admin or the API calls the same service
(`vote_import.votes_import_path`, by way of vote_imports/uploads.py). The command is run by an
operator of the server, not by a user of the site: it skips the check that the user holds the
permissions to add the questions, answers, items, judges and raters a file makes (the admin page
and the API make it). Adding items to a study collecting from people, and handing new items to
raters, are refused here too unless asked for (--add-to-collecting, --for-raters)."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from vote_imports import importers, vote_import

# Formats whose reader takes several files and folders at once.
MANY_PATHS = ("alpaca_eval",)


class Command(BaseCommand):
    help = "Import pairwise votes collected elsewhere (a generic CSV, MT-bench human judgments, PRD Vicuna-80, LLMBar, AlpacaEval annotations) into a study."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "path",
            nargs="+",
            help="vote file (or the MT-bench / PRD / LLMBar dataset folder); alpaca_eval: annotation files or folders",
        )
        parser.add_argument("--format", required=True, choices=sorted(importers.FORMATS))
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--create", action="store_true", help="create the study if there is none by that slug")
        parser.add_argument("--title", help="title of the study --create makes (default: its slug)")
        parser.add_argument("--limit", type=int, help="import only the first N votes (LLMBar: vote rows)")
        parser.add_argument(
            "--add-to-collecting",
            action="store_true",
            help="let the import add items to a study that is collecting votes from people (refused without it)",
        )
        parser.add_argument(
            "--for-raters",
            action="store_true",
            help="hand the items the import adds to raters (without it they are for the file's and LLM judges only)",
        )

    def handle(self, *args, **options) -> None:
        paths = [Path(p) for p in options["path"]]
        for path in paths:
            if not path.exists():
                raise CommandError(f"{path}: no such file or folder")
        if len(paths) > 1 and options["format"] not in MANY_PATHS:
            raise CommandError(
                f"--format {options['format']} reads one file or folder; several: {', '.join(MANY_PATHS)}"
            )
        started = time.perf_counter()
        steps = vote_import.VOTES_IMPORT_STEPS
        progress = (lambda step: self.stdout.write(f"{steps[step]} …")) if options["verbosity"] > 1 else None
        try:
            study, counts = vote_import.votes_import_path(
                slug=options["study"],
                fmt=options["format"],
                path=paths[0] if len(paths) == 1 else paths,
                create=options["create"],
                title=options["title"],
                limit=options["limit"],
                progress=progress,
                add_to_collecting=options["add_to_collecting"],
                for_raters=options["for_raters"],
            )
        except importers.ImportProblem as exc:
            # Every problem the file has, each with its file, line and field (the first 200, then a count).
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        except vote_import.StudyNotFound as exc:
            raise CommandError(str(exc)) from exc
        if options["verbosity"] > 0:
            summary = vote_import.votes_import_summary(counts)
            self.stdout.write(f"imported into {study.slug}: {summary} in {time.perf_counter() - started:.1f} s")
