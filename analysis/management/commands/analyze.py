"""python manage.py analyze --study S [--json] [filters]: every metric of a study.

``--ratings-bootstrap votes`` gives the systems' ratings Chatbot Arena's intervals (votes
resampled) instead of prompts resampled, ``--ratings-anchor S`` prints system S at 1000 (both
report options of every analysis command); ``--refresh-style-scaling`` recomputes the study's
frozen style scaling first (analysis.ratings_service).

``--lc alpaca_eval`` prints instead the AlpacaEval-compatible length-controlled win rate of
every model against the baseline (analysis.lc_alpaca), one table per judge, scored against the
judge's frozen instruction difficulty (analysis.alpaca_difficulty): ``--refit-difficulty`` fits
it again on the models the study has now, ``--load-difficulty FILE`` freezes a file's, and
``--save-difficulty FILE`` writes the judge's (``--judge``) to a file."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from analysis import alpaca_difficulty, current_report, lc_alpaca, ratings_service
from analysis.management.commands._common import add_filter_arguments, filter_form, study_by_slug
from analysis.models import AlpacaDifficulty
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
        parser.add_argument(
            "--refit-difficulty",
            action="store_true",
            help="with --lc: fit the frozen instruction difficulty again on the models the study has now",
        )
        parser.add_argument("--load-difficulty", metavar="FILE", help="with --lc: freeze the difficulty of this file")
        parser.add_argument("--judge", help="with --refit-difficulty or --save-difficulty: this judge only")
        parser.add_argument(
            "--save-difficulty", metavar="FILE", help="with --lc and --judge: write the judge's frozen difficulty here"
        )
        parser.add_argument(
            "--refresh-style-scaling",
            action="store_true",
            help="recompute the study's frozen style scaling from its votes first (every style-controlled rating moves)",
        )
        add_filter_arguments(parser)

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        form = filter_form(options, study)
        if options["lc"]:
            self.difficulty(study, options, form.filters())
            self.lc_table(
                alpaca_difficulty.study_lc_alpaca(study=study, filters=form.filters()), as_json=options["json"]
            )
            if options["save_difficulty"]:
                self.save_difficulty(study, options)
            return
        if options["refresh_style_scaling"]:
            ratings_service.study_style_scaling_refresh(study=study)
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

    def difficulty(self, study, options, filters) -> None:
        """--refit-difficulty, --load-difficulty: before the table is computed."""
        if options["load_difficulty"]:
            try:
                row = alpaca_difficulty.alpaca_difficulty_load(study=study, path=options["load_difficulty"])
            except alpaca_difficulty.DifficultyFileError as exc:
                raise CommandError(str(exc)) from None
            self.stderr.write(f"judge {row.judge}: {alpaca_difficulty.describe(row)}")
        if options["refit_difficulty"]:
            judge = options.get("judge") or None
            try:
                rows = alpaca_difficulty.alpaca_difficulty_refit(study=study, judge=judge, filters=filters)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            for row in rows:
                self.stderr.write(f"judge {row.judge}: {alpaca_difficulty.describe(row)}")

    def save_difficulty(self, study, options) -> None:
        judge = options.get("judge")
        row = AlpacaDifficulty.objects.filter(study=study, judge=judge).first() if judge else None
        if row is None:
            raise CommandError(
                f"--save-difficulty needs --judge naming a judge with a frozen difficulty in {study.slug!r}"
            )
        with open(options["save_difficulty"], "w", encoding="utf-8") as fh:
            json.dump(alpaca_difficulty.alpaca_difficulty_export(difficulty=row), fh)

    def lc_table(self, fits: dict[str, lc_alpaca.AlpacaLC], *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps({judge: fit.rows() for judge, fit in fits.items()}))
            return
        for judge, fit in fits.items():
            self.stdout.write(
                f"AlpacaEval-compatible LC win rates (%), judge {judge}: {len(fit.models)} models, "
                f"{fit.instructions} instructions, length in characters, slopes pooled towards "
                f"{fit.common_slope:.3f} (penalty {fit.slope_penalty:g}); instruction difficulty "
                f"{fit.difficulty_source}"
                + (f"; {fit.unknown_instructions} instructions it does not know" if fit.unknown_instructions else "")
            )
            width = max(len(m) for m in fit.models)
            self.stdout.write(f"{'model':<{width}}  {'n':>5}  {'raw':>6}  {'LC':>6}  {'95% CI':>15}  {'slope':>6}")
            for row in fit.rows():
                ci = f"{row['lc_low']:.2f}-{row['lc_high']:.2f}"
                self.stdout.write(
                    f"{row['model']:<{width}}  {row['n']:>5}  {row['raw_winrate']:>6.2f}  {row['lc_winrate']:>6.2f}  "
                    f"{ci:>15}  {row['length_slope']:>6.3f}"
                )
