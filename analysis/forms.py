"""Query-string and command-line filters, parsed once into analysis.frame.Filters."""

from __future__ import annotations

from django import forms

from analysis.frame import MEASURES, Filters
from analysis.report import Options
from annotations.models import BloomLevel


class FilterForm(forms.Form):
    min_ms = forms.IntegerField(
        required=False, min_value=0, label="Min. response time (ms)", help_text="Empty: the study's threshold."
    )
    ms_per_word = forms.IntegerField(required=False, min_value=0, label="+ ms per word")
    include_not_familiar = forms.BooleanField(required=False, label="Count not-familiar votes")
    include_flagged = forms.BooleanField(required=False, label="Count flagged raters")
    bloom = forms.MultipleChoiceField(required=False, choices=BloomLevel.choices, label="Bloom levels")
    group = forms.MultipleChoiceField(required=False, choices=(), label="Groups")
    since = forms.DateTimeField(required=False, label="Votes from")
    until = forms.DateTimeField(required=False, label="Votes until")
    measure = forms.ChoiceField(required=False, choices=[(m, m) for m in MEASURES], label="Length measure")
    bin_width = forms.IntegerField(required=False, min_value=1, max_value=10_000, label="Length bin width")

    def __init__(self, *args, groups: list[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["group"].choices = [(g, g) for g in groups]

    def clean(self) -> dict:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("'Votes from' must be before 'Votes until'.")
        return data

    def filters(self) -> Filters:
        d = self.cleaned_data
        return Filters(
            min_ms=d.get("min_ms"),
            ms_per_word=d.get("ms_per_word"),
            include_not_familiar=bool(d.get("include_not_familiar")),
            include_flagged=bool(d.get("include_flagged")),
            blooms=list(d.get("bloom") or []),
            groups=list(d.get("group") or []),
            since=d.get("since"),
            until=d.get("until"),
        )

    def options(self, **overrides) -> Options:
        d = self.cleaned_data
        return Options(measure=d.get("measure") or "words", bin_width=d.get("bin_width") or 10, **overrides)
