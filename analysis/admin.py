"""The analysis's own models in the admin: each study's frozen AlpacaEval difficulties, with the
action that refits them, and its frozen style scaling, with the action that recomputes it."""

from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpRequest

from analysis import alpaca_difficulty, ratings_service
from analysis.models import AlpacaDifficulty, StyleScaling


@admin.register(AlpacaDifficulty)
class AlpacaDifficultyAdmin(admin.ModelAdmin):
    """Each study's frozen AlpacaEval difficulties (analysis.alpaca_difficulty): seen, refitted on
    request (the action), or deleted (the next LC freezes a new one); never edited by hand."""

    list_display = ("study", "judge", "source", "instructions", "models_fitted", "slope_pooling", "fitted_at")
    list_filter = ("study",)
    readonly_fields = (
        "study",
        "judge",
        "source",
        "fitted_at",
        "common_slope",
        "slope_penalty",
        "slope_pooling",
        "difficulty_ridge",
        "fitted_models",
    )
    exclude = ("difficulty",)
    actions = ["refit"]

    @admin.display(description="instructions")
    def instructions(self, obj) -> int:
        return len(obj.difficulty)

    @admin.display(description="models")
    def models_fitted(self, obj) -> int:
        return len(obj.fitted_models)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(
        description="Refit the selected difficulties on the models their study has now", permissions=["change"]
    )
    def refit(self, request: HttpRequest, queryset) -> None:
        done = 0
        for row in list(queryset.select_related("study")):
            try:
                alpaca_difficulty.alpaca_difficulty_refit(study=row.study, judge=row.judge)
            except ValueError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                done += 1
        if done:
            self.message_user(request, f"{done} difficult{'y' if done == 1 else 'ies'} refitted", messages.SUCCESS)


@admin.register(StyleScaling)
class StyleScalingAdmin(admin.ModelAdmin):
    """Each study's frozen style scaling (analysis.ratings_service), read-only: it is made by the
    study's first style-controlled rating and changed only by the recompute action."""

    list_display = ("study", "computed_at")
    readonly_fields = ("study", "scaling", "computed_at")
    actions = ("recompute",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(
        description="Recompute from the study's votes (every style-controlled rating moves)", permissions=["change"]
    )
    def recompute(self, request: HttpRequest, queryset) -> None:
        studies = [stored.study for stored in queryset.select_related("study")]
        for study in studies:
            ratings_service.study_style_scaling_refresh(study=study)
        self.message_user(request, f"Recomputed the style scaling of {len(studies)} studies.", messages.SUCCESS)
