from django.apps import AppConfig


class VoteImportsConfig(AppConfig):
    name = "vote_imports"
