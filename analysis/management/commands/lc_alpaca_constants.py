"""python manage.py lc_alpaca_constants ANNOTATIONS --leaderboard CSV [--folds 5] [--json]:
choose the AlpacaEval-compatible LC's constants (the slope pooling κ and the difficulty ridge)
by cross-validation over the models whose annotations a developer has and whose published LC
is in the leaderboard CSV (analysis.lc_alpaca.choose_constants; docs/REPRODUCTIONS.md).
Reads AlpacaEval's annotation files as ``import_votes --format alpaca_eval`` does; writes
nothing to the database. ``--halves`` prints instead the check of docs/REPRODUCTIONS.md: each
half of the models (odd and even places of the published order) scored against a difficulty
fitted on the other half."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError
from scipy.stats import spearmanr

from analysis import lc_alpaca
from vote_imports.import_alpaca_eval import parse_alpaca_eval
from vote_imports.importers import ImportProblem


def annotation_inputs(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(models, instructions, Δ, y) of AlpacaEval's annotation files, as the study's fit reads them
    once imported: the instruction is its prompt key, y the preference for the model."""
    parsed = parse_alpaca_eval(path)
    models, instructions, delta, y = [], [], [], []
    for vote in parsed.votes:
        if vote.option_probs is None:
            continue
        question = parsed.questions[vote.question]
        a1, a2 = (question.answers[a] for a in question.items[vote.group])
        models.append(a2.system)
        instructions.append(question.prompt_key)
        delta.append(len(a2.text) - len(a1.text))
        y.append(vote.option_probs["second"] + vote.option_probs["tie"] / 2)
    return (np.array(models, dtype=object), np.array(instructions, dtype=object), np.array(delta, float), np.array(y))


def published_lc(path: Path) -> dict[str, float]:
    """Model → ``length_controlled_winrate`` of an AlpacaEval leaderboard CSV."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or "length_controlled_winrate" not in rows[0]:
        raise CommandError(f"{path}: expected a leaderboard CSV with a length_controlled_winrate column")
    return {row[""] if "" in row else row["name"]: float(row["length_controlled_winrate"]) for row in rows}


def halves_check(inputs, published: dict[str, float], *, slope_pooling: float, difficulty_ridge: float) -> list[dict]:
    """Each half of the published order (odd places, even places) scored against a difficulty
    fitted on the other half: the held-out half's median and max |error| and its Spearman ρ."""
    ranked = [m for m in sorted(published, key=lambda m: -published[m]) if m in set(inputs[0])]
    halves = {"odd places (1st, 3rd, …)": ranked[0::2], "even places (2nd, 4th, …)": ranked[1::2]}
    out = []
    for name, scored in halves.items():
        fitted_on = [m for m in ranked if m not in scored]
        errors = lc_alpaca.held_out_errors(
            *inputs, published, fitted_on=fitted_on, slope_pooling=slope_pooling, difficulty_ridge=difficulty_ridge
        )
        err = np.array([errors[m] for m in scored])
        ours = [published[m] + errors[m] for m in scored]
        out.append(
            {
                "scored": name,
                "models": len(scored),
                "median": float(np.median(np.abs(err))),
                "max": float(np.abs(err).max()),
                "worst": scored[int(np.abs(err).argmax())],
                "spearman": float(spearmanr(ours, [published[m] for m in scored]).statistic),
                "errors": {m: errors[m] for m in scored},
            }
        )
    return out


class Command(BaseCommand):
    help = "Choose the AlpacaEval-compatible LC's constants by cross-validation over models with a published LC."

    def add_arguments(self, parser) -> None:
        parser.add_argument("annotations", nargs="+", help="AlpacaEval annotation files or folders")
        parser.add_argument("--leaderboard", required=True, help="the leaderboard CSV with the published LC")
        parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
        parser.add_argument(
            "--halves", action="store_true", help="the half-against-half check with the constants in use"
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        try:
            inputs = annotation_inputs([Path(p) for p in options["annotations"]])
        except ImportProblem as exc:
            raise CommandError(str(exc)) from None
        published = published_lc(Path(options["leaderboard"]))
        missing = sorted(set(published) - set(inputs[0]))
        published = {m: v for m, v in published.items() if m not in missing}
        if len(published) < max(options["folds"], 2):
            raise CommandError(
                f"{len(published)} models have annotations and a published LC: too few to cross-validate"
            )
        if options["halves"]:
            result = halves_check(
                inputs, published, slope_pooling=lc_alpaca.SLOPE_POOLING, difficulty_ridge=lc_alpaca.DIFFICULTY_RIDGE
            )
            if options["json"]:
                self.stdout.write(json.dumps(result))
                return
            for row in result:
                self.stdout.write(
                    f"{row['scored']}: {row['models']} models, median |error| {row['median']:.2f}, "
                    f"max {row['max']:.2f} ({row['worst']}), Spearman {row['spearman']:.4f}"
                )
            return
        table, best = lc_alpaca.choose_constants(*inputs, published, folds=options["folds"])
        if options["json"]:
            self.stdout.write(json.dumps({"table": table, "chosen": best}))
            return
        self.stdout.write(f"{len(published)} models, {options['folds']} folds; held-out |error| in points")
        self.stdout.write(f"{'pooling':>8} {'ridge':>7} {'mean':>6} {'median':>6} {'max':>6}")
        for row in table:
            self.stdout.write(
                f"{row['slope_pooling']:>8g} {row['difficulty_ridge']:>7g} {row['mean']:>6.3f} "
                f"{row['median']:>6.3f} {row['max']:>6.3f}"
            )
        self.stdout.write(
            f"chosen: slope_pooling {best['slope_pooling']:g}, difficulty_ridge {best['difficulty_ridge']:g}"
        )
