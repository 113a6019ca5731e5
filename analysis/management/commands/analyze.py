"""python manage.py analyze --study S [--json] [filters]: every metric of a study.

``--lc alpaca_eval`` prints instead the AlpacaEval-compatible length-controlled win rate of
every model against the baseline (analysis.lc_alpaca), one table per judge."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from analysis import current_report, lc_alpaca
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
        parser.add_argument(
            "--lc",
            choices=[lc_alpaca.METHOD],
            help="print only this length-controlled leaderboard (alpaca_eval: every model against the baseline A1)",
        )
        add_filter_arguments(parser)

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        form = filter_form(options, study)
        if options["lc"]:
            self.lc_table(lc_alpaca.study_lc_alpaca(study=study, filters=form.filters()), as_json=options["json"])
            return
        result = current_report.study_analyze(
            study=study,
            filters=form.filters(),
            options=form.options(bootstrap=options["bootstrap"], seed=options["seed"]),
        )
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2 if options["verbosity"] > 1 else None, default=str))
        else:
            for line in report_lines(result, verbose=options["verbosity"] > 1):
                self.stdout.write(line)

    def lc_table(self, fits: dict[str, lc_alpaca.AlpacaLC], *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps({judge: fit.rows() for judge, fit in fits.items()}))
            return
        for judge, fit in fits.items():
            self.stdout.write(
                f"AlpacaEval-compatible LC win rates (%), judge {judge}: {len(fit.models)} models, "
                f"{fit.instructions} instructions, length in characters, slopes pooled towards "
                f"{fit.common_slope:.3f} (penalty {fit.slope_penalty:g})"
            )
            width = max(len(m) for m in fit.models)
            self.stdout.write(f"{'model':<{width}}  {'n':>5}  {'raw':>6}  {'LC':>6}  {'95% CI':>15}  {'slope':>6}")
            for row in fit.rows():
                ci = f"{row['lc_low']:.2f}-{row['lc_high']:.2f}"
                self.stdout.write(
                    f"{row['model']:<{width}}  {row['n']:>5}  {row['raw_winrate']:>6.2f}  {row['lc_winrate']:>6.2f}  "
                    f"{ci:>15}  {row['length_slope']:>6.3f}"
                )
