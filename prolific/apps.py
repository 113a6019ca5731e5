from django.apps import AppConfig


class ProlificConfig(AppConfig):
    name = "prolific"
    default_auto_field = "django.db.models.BigAutoField"
