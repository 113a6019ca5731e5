from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotations.models import Study
from annotations.study_io import StudyFileError, study_import

DEMO_FILE = Path(settings.BASE_DIR) / "fixtures" / "demo_study.json"
DEMO_SLUG = "demo"


class Command(BaseCommand):
    help = "Load the demo study (our own writing, fixtures/demo_study.json) unless it is there already."

    def handle(self, *args, verbosity: int = 1, **options):
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
