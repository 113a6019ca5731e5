"""python manage.py perturb --study S --kind reference --seed 1 [--method rule|model] [--generator NAME]
[--constrain-format] [--of a2] [--dry-run]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotations.models import Study
from biasstudy.limits import SEED_MAX, int_argument
from judges.models import LLMJudge
from perturbations.services import METHODS, GenerateResult, PerturbationError, perturbation_generate


class Command(BaseCommand):
    help = "Generate perturbed variants of one kind for every question of a study (pending review)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="Study slug.")
        parser.add_argument("--kind", required=True, help="Perturbation kind slug, e.g. reference.")
        parser.add_argument("--seed", type=int_argument(0, SEED_MAX), default=1)
        parser.add_argument("--method", choices=METHODS, default="rule")
        parser.add_argument(
            "--generator",
            help="With --method model: the name of the LLM judge whose model rewrites (default: the local one).",
        )
        parser.add_argument(
            "--constrain-format",
            action="store_true",
            help="With --method model and a generator on the OpenAI-compatible backend (e.g. llama.cpp's server): "
            "send a grammar so the reply can only be the fenced blocks the generator reads.",
        )
        parser.add_argument("--of", choices=("a1", "a2"), default="a2", help="Which original to perturb.")
        parser.add_argument("--dry-run", action="store_true", help="Generate and check, write nothing.")

    def handle(self, *args, **options) -> None:
        try:
            study = Study.objects.get(slug=options["study"])
        except Study.DoesNotExist as exc:
            raise CommandError(f"no study with slug {options['study']!r}") from exc
        generator = self.generator(options["generator"], method=options["method"])
        try:
            result = perturbation_generate(
                study=study,
                kind=options["kind"],
                seed=options["seed"],
                method=options["method"],
                generator=generator,
                constrain_format=options["constrain_format"],
                of=options["of"],
                dry_run=options["dry_run"],
            )
        except PerturbationError as exc:
            raise CommandError(str(exc)) from exc
        report(self, result, verbosity=options["verbosity"])
        if result.failed:
            raise CommandError(f"{len(result.failed)} question(s) failed; see above")

    @staticmethod
    def generator(name: str | None, *, method: str) -> LLMJudge | None:
        if name is None:
            return None
        if method != "model":
            raise CommandError("--generator only applies to --method model")
        config = LLMJudge.objects.select_related("judge").filter(judge__name=name).first()
        if config is None:
            known = ", ".join(sorted(LLMJudge.objects.values_list("judge__name", flat=True))) or "none yet"
            raise CommandError(f"no LLM judge named {name!r} (known: {known})")
        return config


def report(command: BaseCommand, result: GenerateResult, *, verbosity: int) -> None:
    verb = "would create" if result.dry_run else "created"
    if verbosity >= 2:
        for answer in result.created:
            warnings = answer.checks.get("warnings", [])
            command.stdout.write(f"{answer.external_id}: {'; '.join(warnings) if warnings else 'checks ok'}")
        for external_id in result.skipped:
            command.stdout.write(f"{external_id}: exists, skipped")
    for question, why in result.failed:
        command.stderr.write(f"{question}: {why}")
    for question, why in result.blocked:
        command.stderr.write(f"{question}: left out, {why}")
    if verbosity >= 1:
        command.stdout.write(
            f"{verb} {len(result.created)} variant(s), {len(result.flagged)} with warnings; "
            f"skipped {len(result.skipped)}; left out {len(result.blocked)} (item has votes); failed {len(result.failed)}"
        )
