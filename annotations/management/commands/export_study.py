import json
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.models import Study
from annotations.study_files import study_export


class Command(BaseCommand):
    help = "Export a study (settings, questions, answers with provenance, items) as biasstudy JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Slug of the study.")
        parser.add_argument("-o", "--output", default="-", help="File to write (default: standard output).")

    def handle(self, *args, study: str, output: str, verbosity: int = 1, **options):
        try:
            found = Study.objects.get(slug=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {study!r}") from None
        text = json.dumps(study_export(study=found), ensure_ascii=False, indent=2) + "\n"
        if output == "-":
            sys.stdout.write(text)
            return
        try:
            with open(output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise CommandError(f"cannot write {output}: {exc.strerror}") from None
        if verbosity:
            self.stderr.write(f"Wrote {output}")
