"""Every input of the rater pages, query strings from the crowd platforms included."""

from __future__ import annotations

from django import forms
from django.core.validators import RegexValidator

from annotations.models import ChoiceShown, Rater

# Printable ids without spaces: what Prolific, MTurk and hand-typed codes look like.
_participant_id = RegexValidator(r"^[A-Za-z0-9_.@:+-]{1,128}$", "Use letters, digits and _ . @ : + - only, no spaces.")
_MAX_CLIENT_MS = 24 * 3600 * 1000


class PlatformForm(forms.Form):
    """The ids Prolific and MTurk append to the study link. Invalid ids are ignored, not trusted."""

    PROLIFIC_PID = forms.CharField(required=False, max_length=128, validators=[_participant_id])
    STUDY_ID = forms.CharField(required=False, max_length=128)
    SESSION_ID = forms.CharField(required=False, max_length=128)
    workerId = forms.CharField(required=False, max_length=128, validators=[_participant_id])
    assignmentId = forms.CharField(required=False, max_length=128)
    hitId = forms.CharField(required=False, max_length=128)

    MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"

    def platform(self) -> tuple[str, str, dict] | None:
        """(source, participant_id, source_meta) when the link came from a platform, else None."""
        if not self.is_valid():
            return None
        data = self.cleaned_data
        if data["PROLIFIC_PID"]:
            meta = {"STUDY_ID": data["STUDY_ID"], "SESSION_ID": data["SESSION_ID"]}
            return Rater.Source.PROLIFIC, data["PROLIFIC_PID"], meta
        if data["workerId"] and not self.is_mturk_preview():
            meta = {"assignmentId": data["assignmentId"], "hitId": data["hitId"]}
            return Rater.Source.MTURK, data["workerId"], meta
        return None

    def is_mturk_preview(self) -> bool:
        return self.data.get("assignmentId") == self.MTURK_PREVIEW


class EnterForm(forms.Form):
    participant_id = forms.CharField(
        label="Your participant id",
        max_length=128,
        validators=[_participant_id],
        help_text="Use the same id to come back later and continue where you stopped.",
        widget=forms.TextInput(attrs={"aria-describedby": "id_participant_id-help", "autocomplete": "off"}),
    )
    consent = forms.BooleanField(label="I have read the information above and agree to take part.", required=True)

    def __init__(self, *args, platform_id: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if platform_id is not None:
            # The platform already told us who this is; the id field is not shown.
            del self.fields["participant_id"]


class VoteForm(forms.Form):
    token = forms.CharField(max_length=43, widget=forms.HiddenInput)
    choice = forms.ChoiceField(choices=ChoiceShown.choices)
    not_familiar = forms.BooleanField(required=False, label="I am not familiar with this topic")
    client_ms = forms.IntegerField(required=False, min_value=0, max_value=_MAX_CLIENT_MS, widget=forms.HiddenInput)
