"""The Prolific page's forms: every button posts one, and the view reads only cleaned data."""

from __future__ import annotations

from django import forms

from prolific.services import DEVICES, REJECTION_CATEGORIES, REJECTION_MESSAGE_MIN, STUDY_ACTIONS

ACTIONS = ["create", "cost", "transition", "sync", "approve", "reject", "pay"]


class ActionForm(forms.Form):
    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])


class DraftForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="The title participants see on Prolific.")
    description = forms.CharField(
        max_length=5000, widget=forms.Textarea(attrs={"rows": 3}), help_text="What participants read before starting."
    )
    reward_cents = forms.IntegerField(
        min_value=1, label="Reward (cents)", help_text="Per participant, in your Prolific account's currency."
    )
    places = forms.IntegerField(min_value=1, help_text="How many participants.")
    estimated_minutes = forms.IntegerField(min_value=1, label="Estimated minutes")
    devices = forms.MultipleChoiceField(
        choices=[(d, d) for d in DEVICES], widget=forms.CheckboxSelectMultiple, label="Devices allowed"
    )


class TransitionForm(forms.Form):
    study_action = forms.ChoiceField(choices=list(STUDY_ACTIONS.items()))


class ReviewForm(forms.Form):
    """Approve or reject one submission, or every one our rules suggest it for (`suggested`)."""

    submission = forms.CharField(max_length=64, required=False)
    suggested = forms.BooleanField(required=False)

    def clean(self) -> dict:
        data = super().clean()
        if not data.get("submission") and not data.get("suggested"):
            raise forms.ValidationError("choose a submission, or all those our rules suggest")
        return data


class RejectForm(ReviewForm):
    category = forms.ChoiceField(
        choices=[("", "—"), *REJECTION_CATEGORIES.items()], label="Rejection category", required=True
    )
    message = forms.CharField(
        min_length=REJECTION_MESSAGE_MIN,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"Sent to the participant: at least {REJECTION_MESSAGE_MIN} characters (Prolific's rule).",
    )


class BonusForm(forms.Form):
    """The bonus: per counted vote, or per rater (one of the two)."""

    per_vote = forms.DecimalField(
        required=False, min_value=0, max_value=100, decimal_places=2, label="Bonus per counted vote"
    )
    per_rater = forms.DecimalField(required=False, min_value=0, max_value=1000, decimal_places=2, label="or per rater")

    def clean(self) -> dict:
        data = super().clean()
        if (data.get("per_vote") is None) == (data.get("per_rater") is None):
            raise forms.ValidationError("give a bonus per counted vote or a bonus per rater, one of the two")
        return data
