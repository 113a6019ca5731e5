"""Every input of the rater pages, query strings from the crowd platforms included."""

from __future__ import annotations

import string
import unicodedata
from urllib.parse import urlsplit

from django import forms
from django.core.exceptions import ValidationError

from annotations.models import ChoiceShown, Rater

# Printable ids without spaces: what Prolific, MTurk and hand-typed codes look like.
PARTICIPANT_ID_CHARS = frozenset(string.ascii_letters + string.digits + "_.@:+-")
_MAX_CLIENT_MS = 24 * 3600 * 1000
# Where an MTurk assignment may be submitted back: the two official hosts (https), or this
# machine (a stand-in for tests and local trials). Anything else is ignored, so a link cannot
# make the done page post to a site of its choosing.
MTURK_SUBMIT_HOSTS = frozenset({"www.mturk.com", "workersandbox.mturk.com"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


_WHITESPACE_NAMES = {" ": "space", "\t": "tab", "\n": "line break", "\r": "line break"}


def _char_name(char: str) -> str:
    """A character as a rater can recognise it in a message: visible ones quoted, invisible
    ones (spaces, tabs, zero-width marks) by name."""
    if char in _WHITESPACE_NAMES:
        return _WHITESPACE_NAMES[char]
    if unicodedata.category(char)[0] in "CZ":
        return unicodedata.name(char, f"U+{ord(char):04X}").lower()
    return f"“{char}”"


def validate_participant_id(value: str) -> None:
    """Name the characters we do not accept, in order of appearance, each once."""
    if not value.strip():
        raise ValidationError("Your participant id is only spaces: please type the id you were given.", code="blank")
    bad = dict.fromkeys(c for c in value.strip() if c not in PARTICIPANT_ID_CHARS)
    if bad:
        raise ValidationError(
            "These characters are not accepted: %(chars)s. Use letters, digits and _ . @ : + - only.",
            code="invalid_chars",
            params={"chars": ", ".join(_char_name(c) for c in bad)},
        )


# What an origin is written with; a space, quote or semicolon would add sources or directives to
# the done page's Content-Security-Policy, which names the origin.
_ORIGIN_CHARS = frozenset(string.ascii_letters + string.digits + ":/.-[]")


def turk_submit_origin(value: str) -> str:
    """The origin MTurk's `turkSubmitTo` names (`https://www.mturk.com`, its sandbox, or a
    loopback stand-in), rebuilt from its parsed parts: the done page posts there and its CSP
    allows it. Anything that is not such an origin alone (a path, credentials, a query, a
    character no origin has) is refused."""
    refused = ValidationError("turkSubmitTo is not an MTurk endpoint.", code="not_mturk")
    if len(value) > 200:
        raise ValidationError("turkSubmitTo is too long.", code="too_long")
    if not value or not _ORIGIN_CHARS.issuperset(value):
        raise refused
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        raise refused from None
    host = parts.hostname
    if "@" in parts.netloc or parts.path not in ("", "/") or parts.query or parts.fragment or not host:
        raise refused
    official = parts.scheme == "https" and host in MTURK_SUBMIT_HOSTS and port is None
    loopback = parts.scheme in ("http", "https") and host in LOOPBACK_HOSTS
    if not (official or loopback):
        raise refused
    netloc = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{netloc}" + (f":{port}" if port is not None else "")


class PlatformForm(forms.Form):
    """The ids Prolific and MTurk append to the study link. Invalid ids are ignored, not trusted."""

    PROLIFIC_PID = forms.CharField(required=False, max_length=128, validators=[validate_participant_id])
    STUDY_ID = forms.CharField(required=False, max_length=128)
    SESSION_ID = forms.CharField(required=False, max_length=128)
    workerId = forms.CharField(required=False, max_length=128, validators=[validate_participant_id])
    assignmentId = forms.CharField(required=False, max_length=128)
    hitId = forms.CharField(required=False, max_length=128)
    turkSubmitTo = forms.CharField(required=False)

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
            if data["turkSubmitTo"]:
                meta["turkSubmitTo"] = data["turkSubmitTo"]
            return Rater.Source.MTURK, data["workerId"], meta
        return None

    def clean_turkSubmitTo(self) -> str:
        """An endpoint we would not post to is dropped, not an error: the worker still gets in
        (and their completion code to paste)."""
        try:
            return turk_submit_origin(self.cleaned_data["turkSubmitTo"])
        except ValidationError:
            return ""

    def is_mturk_preview(self) -> bool:
        return self.data.get("assignmentId") == self.MTURK_PREVIEW

    def id_problems(self) -> list[str]:
        """Why the participant id in the link was not accepted (empty when it was, or there was
        none): the rater then types an id, and should know why they are asked to."""
        return [str(e) for name in ("PROLIFIC_PID", "workerId") for e in self.errors.get(name, [])]


class EnterForm(forms.Form):
    participant_id = forms.CharField(
        label="Your participant id",
        max_length=128,
        strip=False,  # an id of only spaces is named as such, not "required"
        validators=[validate_participant_id],
        help_text="Use the same id to come back later and continue where you stopped.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        error_messages={"required": "Please type your participant id."},
    )
    consent = forms.BooleanField(
        label="I have read the information above and agree to take part.",
        required=True,
        error_messages={"required": "Please tick this box to take part."},
    )

    def clean_participant_id(self) -> str:
        return self.cleaned_data["participant_id"].strip()

    def __init__(self, *args, platform_id: str | None = None, consented: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if platform_id is not None:
            # The platform already told us who this is; the id field is not shown.
            del self.fields["participant_id"]
        if consented:
            # The platform link names a rater who agreed when they first entered: coming back
            # (to go on, or for their code) is not asked again.
            del self.fields["consent"]


class VoteForm(forms.Form):
    token = forms.CharField(max_length=43, widget=forms.HiddenInput)
    choice = forms.ChoiceField(choices=ChoiceShown.choices)
    not_familiar = forms.BooleanField(required=False, label="I am not familiar with this topic")
    client_ms = forms.IntegerField(required=False, min_value=0, max_value=_MAX_CLIENT_MS, widget=forms.HiddenInput)
