"""python manage.py analyze --study S [--json] [filters]: every metric of a study."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from analysis import services
from analysis.management.commands._common import add_filter_arguments, filter_form, study_by_slug
from analysis.text import report_lines
from biasstudy.limits import BOOTSTRAP_MAX, SEED_MAX, int_argument


class Command(BaseCommand):
    help = "Compute ASR, accuracy, positional and verbosity preference and the rest for a study."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--bootstrap", type=int_argument(0, BOOTSTRAP_MAX), default=1000, help="bootstrap resamples (default 1000)"
        )
        parser.add_argument("--seed", type=int_argument(0, SEED_MAX), default=0)
        add_filter_arguments(parser)

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        groups, _ = services.study_groups(study=study)
        form = filter_form(options, groups, services.study_runs(study=study), services.study_subsets(study=study))
        result = services.study_analyze(
            study=study,
            filters=form.filters(),
            options=form.options(bootstrap=options["bootstrap"], seed=options["seed"]),
        )
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2 if options["verbosity"] > 1 else None, default=str))
        else:
            for line in report_lines(result, verbose=options["verbosity"] > 1):
                self.stdout.write(line)
