"""Forms of the perturbation admin pages: every input, query-string filters included, goes through one."""

from __future__ import annotations

from django import forms
from django.db.models import Q

from annotations.models import Answer, PerturbationKind, Study
from biasstudy.limits import SEED_MAX
from biasstudy.rendering import MAX_MARKDOWN_CHARS
from judges.models import LLMJudge
from perturbations.services import METHODS


def kinds_for(studies) -> forms.ModelChoiceField:
    ids = [s.pk for s in studies]
    return PerturbationKind.objects.filter(Q(study__isnull=True) | Q(study__in=ids)).order_by("slug")


class GenerateForm(forms.Form):
    kind = forms.ModelChoiceField(queryset=PerturbationKind.objects.none(), to_field_name="slug")
    seed = forms.IntegerField(min_value=0, max_value=SEED_MAX, initial=1)
    method = forms.ChoiceField(choices=[(m, m) for m in METHODS], initial="rule")
    of = forms.ChoiceField(
        choices=[("a2", "A2 (the second original)"), ("a1", "A1 (the first original)")],
        initial="a2",
        label="Perturb",
    )
    generator = forms.ModelChoiceField(
        queryset=LLMJudge.objects.select_related("judge").order_by("judge__name"),
        required=False,
        empty_label=None,
        label="Generator model",
        help_text="For method model: the LLM judge configuration whose model rewrites the answers.",
    )

    def __init__(self, *args, studies: list[Study], default_generator: LLMJudge | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].queryset = kinds_for(studies)
        if default_generator is not None:
            self.fields["generator"].initial = default_generator.pk

    def clean(self) -> dict:
        data = super().clean()
        if data.get("method") == "model" and not data.get("generator"):
            self.add_error("generator", "choose the LLM judge configuration whose model generates")
        return data


class ReviewFilterForm(forms.Form):
    status = forms.ChoiceField(choices=[("", "any status"), *Answer.Review.choices], required=False)
    kind = forms.ModelChoiceField(
        queryset=PerturbationKind.objects.none(), required=False, to_field_name="slug", empty_label="any kind"
    )
    flagged = forms.BooleanField(required=False, label="with warnings only")
    page = forms.IntegerField(min_value=1, required=False)

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].queryset = kinds_for([study])


class ReviewForm(forms.Form):
    """One decision: either a bulk one on the ticked variants, or one variant's own button."""

    bulk = forms.ChoiceField(choices=[("approve", "approve"), ("reject", "reject")], required=False)
    single = forms.RegexField(regex=r"^(approve|reject):\d+$", required=False)
    selected = forms.ModelMultipleChoiceField(queryset=Answer.objects.none(), required=False)
    note = forms.CharField(required=False, max_length=2000)

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        variants = Answer.objects.variants().filter(question__study=study)
        self.fields["selected"].queryset = variants
        self.variants = variants

    def clean(self) -> dict:
        data = super().clean()
        if data.get("single"):
            decision, pk = data["single"].split(":")
            answer = self.variants.filter(pk=int(pk)).first()
            if answer is None:
                raise forms.ValidationError("that variant is not in this study")
            data["decision"], data["answers"] = decision, [answer]
        elif data.get("bulk"):
            if not data.get("selected"):
                raise forms.ValidationError("tick at least one variant for a bulk decision")
            data["decision"], data["answers"] = data["bulk"], list(data["selected"])
        else:
            raise forms.ValidationError("choose approve or reject")
        return data


class EditForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 18, "cols": 100}), strip=False, max_length=MAX_MARKDOWN_CHARS
    )
    note = forms.CharField(required=False, max_length=2000, help_text="Why you changed it (kept with the revision).")
