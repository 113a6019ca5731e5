from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class AnalysisConfig(AppConfig):
    name = "analysis"

    def ready(self) -> None:
        from analysis import results_cache
        from annotations.models import Answer, ComparisonItem, Judge, PerturbationKind, Question, Vote

        # Edits in place that the data version's counts cannot see (a Bloom level, a gold label,
        # a judge's name): each one makes every stored report unreachable. Raters are left out:
        # they are saved on every vote, and their changes are counted in the version. So are
        # new votes; a vote saved again or deleted renews the token (results_cache.vote_edit_renew).
        for model in (Question, Answer, ComparisonItem, Judge, PerturbationKind):
            for signal in (post_save, post_delete):
                signal.connect(results_cache.edit_token_renew, sender=model, dispatch_uid=f"results-{model.__name__}")
        for signal in (post_save, post_delete):
            signal.connect(results_cache.vote_edit_renew, sender=Vote, dispatch_uid="results-Vote")
