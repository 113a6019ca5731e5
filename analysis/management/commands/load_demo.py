from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from analysis.simulate import JudgeParams
from analysis.simulated_judges import judge_simulate
from annotations.models import Study
from annotations.study_files import StudyFileError, study_import

DEMO_FILE = Path(settings.BASE_DIR) / "fixtures" / "demo_study.json"
DEMO_SLUG = "demo"


# Two simulated judges with known biases vote on the demo at once, so that the dashboard has
# something to show before any rater or model has voted (log-odds, see analysis/simulate.py).
DEMO_SIMULATED_JUDGES = {
    "Simulated: swayed by references and formatting": {
        "position": 0.2,
        "susceptibility": {
            "reference": 1.2,
            "rich_content": 0.8,
            "factual_error": -1.5,
            "bandwagon": 1.0,
            "authority_source": 0.9,
            "sycophancy": 0.6,
            "verbosity": 0.7,
            "refinement": 0.5,
            "distraction": 0.2,
            "identity": 0.3,
        },
    },
    "Simulated: prefers the left answer": {"position": 1.2, "susceptibility": {"factual_error": -0.8}},
}


# Here, not in the core app: the simulated judges are the analysis app's (the core imports no other app).
class Command(BaseCommand):
    help = "Load the demo study (our own writing, fixtures/demo_study.json) unless it is there already."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-simulated", action="store_true", help="Do not add the two simulated judges' votes.")

    def handle(self, *args, verbosity: int = 1, no_simulated: bool = False, **options):
        if Study.objects.filter(slug=DEMO_SLUG).exists():
            if verbosity:
                self.stdout.write("The demo study is loaded already.")
            return
        try:
            study = study_import(path=DEMO_FILE, fmt="biasstudy")
        except StudyFileError as exc:
            raise CommandError(f"the demo study could not be loaded: {exc}") from None
        if verbosity:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Loaded the demo study: {study.questions.filter(is_gold=False).count()} questions, "
                    f"{study.items.scored().count()} items. Raters start at /s/{study.slug}/"
                )
            )
        if no_simulated:
            return
        for seed, (name, params) in enumerate(DEMO_SIMULATED_JUDGES.items(), start=1):
            _, votes = judge_simulate(study=study, name=name, params=JudgeParams(**params), seed=seed)
            if verbosity:
                self.stdout.write(f"  {name!r}: {votes} simulated votes (see /dashboard/)")
