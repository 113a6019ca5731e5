"""Forms of the admin's own pages for studies: uploading a study file, and a question with its
two answers (the rater pages' forms are in forms.py)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q

from annotations.models import Answer, PerturbationKind, Question, Study
from annotations.study_files import validate_answer_record
from biasstudy.rendering import MAX_TEXT_CHARS, validate_markdown


class StudyUploadForm(forms.Form):
    """A study file for the admin's upload page, with the command's optional overrides."""

    file = forms.FileField(
        label="Study file",
        help_text="Our JSON format (biasstudy, as export_study writes it), or the chen2024 folder as a .zip "
        "(raw.json and one file per perturbation kind).",
        widget=forms.ClearableFileInput(attrs={"accept": ".json,.zip,application/json,application/zip"}),
    )
    slug = forms.SlugField(required=False, max_length=80, help_text="Slug of the new study, instead of the file's.")
    title = forms.CharField(required=False, max_length=200, help_text="Title of the new study, instead of the file's.")
    status = forms.ChoiceField(
        required=False, choices=[("", "as in the file"), *Study.Status.choices], help_text="Instead of the file's."
    )


class StudyAdminForm(forms.ModelForm):
    """The study's settings in the admin. A target above the most one rater can get is lowered
    to that number (`lowered_target`: (old, new), for the page's warning) instead of refused:
    a study made with the default target and then given its questions would otherwise fail its
    next save on a field the researcher never touched."""

    # No Meta: the admin makes it, with the study's fields from its fieldsets.
    lowered_target: tuple[int, int] | None = None

    def clean(self) -> dict:
        data = super().clean()
        if self.instance.pk is None or data.get("target_per_rater") is None:
            return data
        probe = Study(
            pk=self.instance.pk,
            target_per_rater=data["target_per_rater"],
            gold_every=data.get("gold_every", self.instance.gold_every),
            one_variant_per_question=data.get("one_variant_per_question", self.instance.one_variant_per_question),
        )
        self.lowered_target = probe.target_reachable()
        if self.lowered_target:
            data["target_per_rater"] = probe.target_per_rater
        return data


class QuestionCreateForm(forms.ModelForm):
    """A new question with its two original answers; saving it also makes the control item."""

    answer_a1 = forms.CharField(
        label="Answer A1",
        widget=forms.Textarea(attrs={"rows": 8}),
        max_length=MAX_TEXT_CHARS,
        validators=[validate_markdown],
        help_text="Markdown. For an attention check: the better answer.",
    )
    answer_a2 = forms.CharField(
        label="Answer A2",
        widget=forms.Textarea(attrs={"rows": 8}),
        max_length=MAX_TEXT_CHARS,
        validators=[validate_markdown],
        help_text="Markdown. For an attention check: the worse answer.",
    )
    gold_label = forms.ChoiceField(
        label="Which answer is better?",
        choices=[("", "Not known"), ("a1", "A1 is better"), ("a2", "A2 is better")],
        required=False,
        help_text="If one answer is known to be the better one, say which: the dashboard then gives each "
        "judge's accuracy against it. Attention checks always count A1 as the better answer.",
    )

    class Meta:
        model = Question
        fields = ["study", "external_id", "bloom_level", "text", "is_gold"]
        help_texts = {"external_id": "Unique in the study; the answers get this id plus -a1 and -a2."}

    def clean(self) -> dict:
        data = super().clean()
        if data.get("answer_a1") and data.get("answer_a1", "").strip() == data.get("answer_a2", "").strip():
            self.add_error("answer_a2", "The two answers are the same text; a comparison needs two different answers.")
        return data


def limit_answer_choices(form_class: type[forms.BaseForm], question: Question | None) -> None:
    """A variant is derived from an answer of its own question, and its kind is a built-in one or
    its study's own: the choices offer nothing else. `form_class` is a fresh class (the admin
    builds one per request), so changing its fields touches no other request."""
    derived_from = form_class.base_fields.get("derived_from")
    if derived_from is not None:
        derived_from.queryset = (
            Answer.objects.filter(question=question).order_by("external_id") if question else Answer.objects.none()
        )
        derived_from.help_text = (
            "Only the answers of this question; empty for the two originals."
            if question
            else "Save the answer first, or add variants on their question's page."
        )
    kind = form_class.base_fields.get("kind")
    if kind is not None and question is not None:
        kind.queryset = PerturbationKind.objects.filter(Q(study__isnull=True) | Q(study=question.study_id))


class AnswerForm(forms.ModelForm):
    """An answer as staff edit it, on its own page and below its question: text no longer than a
    study file may hold, the JSON fields of the types the review page and the checks read
    (annotations.study_files), and a variant's original an answer of the same question."""

    text = forms.CharField(widget=forms.Textarea, strip=False, max_length=MAX_TEXT_CHARS)

    class Meta:
        model = Answer
        fields = [
            "question", "external_id", "text", "derived_from", "kind", "provenance", "review_status",
            "inserted_errors", "checks", "created_at",
        ]  # fmt: skip

    def clean(self) -> dict:
        data = super().clean()
        # Below its question (the inline) the form has no question field: the formset set it on the instance.
        question = data.get("question")
        question_id = question.pk if question is not None else self.instance.question_id
        parent = data.get("derived_from")
        if parent is not None and question_id is not None and parent.question_id != question_id:
            self.add_error("derived_from", f"{parent.external_id} is an answer of another question.")
        if parent is not None and not data.get("kind"):
            self.add_error("kind", "A variant needs the kind of perturbation that made it.")
        if parent is None and data.get("kind"):
            self.add_error("derived_from", "A variant needs the answer it was made from.")
        self._check_json_fields(data)
        return data

    def _check_json_fields(self, data: dict) -> None:
        def fail(message: str, field: str, near: str | None = None) -> None:
            name = field.split(".")[1].split("[")[0]
            shown = f"{field.removeprefix('answer.')}: {message}"
            raise ValidationError({name if name in self.fields else None: shown})

        record = {"id": "answer"}
        json_fields = ("review_status", "inserted_errors", "provenance", "checks")
        record.update({key: data[key] for key in json_fields if key in data})
        try:
            validate_answer_record(record, "answer", fail)
        except ValidationError as exc:
            self.add_error(None, exc)
