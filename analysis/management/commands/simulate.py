"""python manage.py simulate --study S --name NAME [bias options]: a simulated judge votes on the
study's items (or, with --raters N, simulated people fill the human pool)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from analysis import simulated_judges
from analysis.management.commands._common import study_by_slug
from analysis.simulate import DEFAULT_SUSCEPTIBILITY, JudgeParams
from biasstudy.limits import SEED_MAX, VOTES_PER_ITEM_MAX, int_argument


class Command(BaseCommand):
    help = "Let a judge with set biases vote on a study's items (demo data, tests, power analysis)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True)
        parser.add_argument("--name", default="simulated", help="judge name (ignored with --raters)")
        parser.add_argument("--raters", type=int, help="simulate this many human raters instead of a judge")
        parser.add_argument("--position", type=float, default=0.0, help="log-odds towards the answer shown first")
        parser.add_argument(
            "--label-bias",
            type=float,
            default=0.0,
            help="log-odds towards the answer under the first label (A), whatever its position (judges only)",
        )
        parser.add_argument(
            "--length-per-token", type=float, default=0.0, help="log-odds per word of length difference"
        )
        parser.add_argument(
            "--susceptibility",
            default=json.dumps(DEFAULT_SUSCEPTIBILITY),
            help='JSON {"kind": log-odds towards the perturbed answer}',
        )
        parser.add_argument("--tie-rate", type=float, default=0.1)
        parser.add_argument("--noise", type=float, default=1.0)
        parser.add_argument("--votes-per-item", type=int_argument(1, VOTES_PER_ITEM_MAX), help="default: the study's")
        parser.add_argument("--flag-share", type=float, default=0.0, help="share of simulated raters flagged")
        parser.add_argument("--seed", type=int_argument(0, SEED_MAX), default=0)

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        try:
            susceptibility = {str(k): float(v) for k, v in json.loads(options["susceptibility"]).items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise CommandError(f"--susceptibility: not a JSON object of numbers ({exc})") from None
        if not 0 <= options["tie_rate"] < 1:
            raise CommandError("--tie-rate must be in [0, 1)")
        params = JudgeParams(
            position=options["position"],
            label=options["label_bias"],
            length_per_token=options["length_per_token"],
            susceptibility=susceptibility,
            tie_rate=options["tie_rate"],
            noise=options["noise"],
        )
        if options["raters"]:
            try:
                n = simulated_judges.raters_simulate(
                    study=study,
                    raters=options["raters"],
                    params=params,
                    votes_per_item=options["votes_per_item"],
                    seed=options["seed"],
                    flag_share=options["flag_share"],
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            who = f"{options['raters']} simulated raters"
        else:
            _, n = simulated_judges.judge_simulate(
                study=study,
                name=options["name"],
                params=params,
                votes_per_item=options["votes_per_item"],
                seed=options["seed"],
            )
            who = f"simulated judge {options['name']!r}"
        if options["verbosity"] > 0:
            self.stdout.write(f"{who}: {n} votes on {study.slug}")
