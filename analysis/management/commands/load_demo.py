from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from analysis.simulate import JudgeParams
from analysis.simulated_judges import judge_simulate, raters_simulate
from annotations.models import Question, Study, Vote
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


# Simulated people, so that the "Judges against people" section has figures: 12 raters fill
# each item's 6 votes (about 70 items each, over the alt-test's 30 per rater tested), then keep
# their votes on two questions in three, as a study still collecting would have them: the
# judges' votes on the other questions are what prediction-powered inference adds. Their seed is
# the first simulated judge's, so that both see the same answers as better (the same latent
# quality of each answer, analysis/simulate.py) and differ in their biases and their noise; the
# left-preferring judge (seed 2) reads the answers otherwise.
DEMO_RATERS = 12
DEMO_RATER_SEED = 1
DEMO_RATER_PARAMS = {
    "position": 0.3,
    "susceptibility": {"reference": 0.3, "rich_content": 0.4, "factual_error": -1.5, "bandwagon": 0.5},
}
DEMO_PEOPLE_ON_EVERY = 3  # people keep their votes on questions but every third


# Here, not in the core app: the simulated judges are the analysis app's (the core imports no other app).
class Command(BaseCommand):
    help = "Load the demo study (our own writing, fixtures/demo_study.json) unless it is there already."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--no-simulated", action="store_true", help="Do not add the simulated judges' and raters' votes."
        )

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
        votes = demo_people(study)
        if verbosity:
            self.stdout.write(f"  {DEMO_RATERS} simulated raters: {votes} votes on two questions in three")


def demo_people(study: Study) -> int:
    """The demo's simulated raters (``DEMO_RATER_PARAMS``) on two of every three questions;
    returns the votes kept. One transaction: no half-filled pool."""
    with transaction.atomic():
        raters_simulate(study=study, raters=DEMO_RATERS, params=JudgeParams(**DEMO_RATER_PARAMS), seed=DEMO_RATER_SEED)
        questions = list(
            Question.objects.filter(study=study, is_gold=False).order_by("pk").values_list("pk", flat=True)
        )
        later = questions[DEMO_PEOPLE_ON_EVERY - 1 :: DEMO_PEOPLE_ON_EVERY]
        people = Vote.objects.filter(item__study=study, rater__isnull=False)
        people.filter(item__question_id__in=later).delete()
        Study.objects.filter(pk=study.pk).data_changed()
        return people.count()
