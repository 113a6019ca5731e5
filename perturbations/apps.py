from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_builtin_kinds(sender, **kwargs) -> None:
    from perturbations.services import kinds_ensure_builtin

    kinds_ensure_builtin(using=kwargs.get("using", "default"))


class PerturbationsConfig(AppConfig):
    name = "perturbations"

    def ready(self) -> None:
        # Built-in kinds exist in every database, including each test database.
        post_migrate.connect(_ensure_builtin_kinds, sender=self)
