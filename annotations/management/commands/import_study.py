from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.study_files import READERS, StudyFileError, study_document_write, study_file_read


class Command(BaseCommand):
    help = "Import a study: our JSON format (biasstudy) or the files published with Chen et al. 2024 (chen2024)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "path", help="A biasstudy JSON file, or the chen2024 folder (raw.json + one file per kind)."
        )
        parser.add_argument("--format", dest="fmt", choices=sorted(READERS), required=True)
        parser.add_argument("--slug", help="Slug of the new study (overrides the file's).")
        parser.add_argument("--title", help="Title of the new study (overrides the file's).")
        parser.add_argument("--status", help="draft, collecting or closed (overrides the file's).")

    def handle(self, *args, path: str, fmt: str, slug=None, title=None, status=None, verbosity: int = 1, **options):
        try:  # study_import's two steps, so that the reading's notes can be shown
            document = study_file_read(path=path, fmt=fmt, slug=slug, title=title, status=status)
            study = study_document_write(document)
        except StudyFileError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from None
        for note in document["notes"]:
            self.stderr.write(self.style.WARNING(f"Warning: {note}"))
        if verbosity:
            questions = study.questions.filter(is_gold=False).count()
            self.stdout.write(
                self.style.SUCCESS(
                    f"Imported study {study.slug!r}: {questions} questions, "
                    f"{study.items.scored().count()} comparison items, "
                    f"{study.questions.filter(is_gold=True).count()} attention checks."
                )
            )
