from django.apps import AppConfig
from django.core.management import call_command
from django.db.models.signals import post_migrate


def _create_cache_table(sender, using: str = "default", verbosity: int = 1, **kwargs) -> None:
    """`migrate` also creates the database cache's table (when that is the cache in use), so a
    deployment needs no extra `createcachetable` step. Idempotent."""
    call_command("createcachetable", database=using, verbosity=verbosity)


class AnnotationsConfig(AppConfig):
    name = "annotations"
    # Its own, not only the project's DEFAULT_AUTO_FIELD: the app's migrations made BigAutoFields.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_create_cache_table, sender=self)
        from annotations import data_version  # the models are ready now

        data_version.connect()
