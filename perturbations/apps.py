from django.apps import AppConfig
from django.db.models.signals import post_migrate

from annotations.signals import study_answers_prepared


def _check_imported_variants(sender, *, answers, **kwargs) -> None:
    from perturbations.services import variants_checks_fill

    variants_checks_fill(answers=answers)


def _ensure_builtin_kinds(sender, **kwargs) -> None:
    from perturbations.services import kinds_ensure_builtin

    kinds_ensure_builtin(using=kwargs.get("using", "default"))


class PerturbationsConfig(AppConfig):
    name = "perturbations"

    def ready(self) -> None:
        # Built-in kinds exist in every database, including each test database.
        post_migrate.connect(_ensure_builtin_kinds, sender=self)
        # A study file's variants come with the checks it carries, or none: the review page's
        # "with warnings only" filter reads the stored ones.
        study_answers_prepared.connect(_check_imported_variants, dispatch_uid="perturbations.check_imported_variants")
