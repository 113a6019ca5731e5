"""Forms of the perturbation admin pages: every input, query-string filters included, goes through one."""

from __future__ import annotations

from django import forms
from django.db.models import Q

from annotations.models import Answer, PerturbationKind, Study, validate_context
from biasstudy.limits import SEED_MAX
from biasstudy.rendering import MAX_TEXT_CHARS, validate_markdown
from judges.models import LLMJudge
from perturbations.services import (
    METHODS,
    generator_can_write_errors,
    grammar_refusal,
    kind_wants_errors,
    method_refusal,
    questions_with_voted_items,
    study_vote_summary,
)


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
    constrain_format = forms.BooleanField(
        required=False,
        label="Constrain the reply's format with a grammar",
        help_text="For method model, with a generator on the OpenAI-compatible backend, such as a small model on "
        "a local llama.cpp server: send a GBNF grammar (the server's `grammar` field) so that the reply can only "
        "be the fenced blocks the generator reads (```answer, and for factual errors the ```errors list). The "
        "model still chooses the words; the review shows what it wrote. Servers without grammar support reject "
        "or ignore it.",
    )
    new_group = forms.BooleanField(
        required=False,
        label="As a new group",
        help_text="Make the variants a new kind of this study (a copy of the chosen one): new items that start "
        "from zero votes, analysed as their own group beside the items that already have votes.",
    )

    def __init__(self, *args, studies: list[Study], default_generator: LLMJudge | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.studies = studies
        self.fields["kind"].queryset = kinds_for(studies)
        if default_generator is not None:
            self.fields["generator"].initial = default_generator.pk
        able = [str(g) for g in self.fields["generator"].queryset if generator_can_write_errors(g)]
        self.fields["generator"].help_text += (
            " Factual errors (the model must plant errors and list them) need a model behind an API: "
            + (
                ", ".join(able)
                if able
                else "no such configuration yet; add an LLM judge on the OpenAI-compatible or Anthropic backend"
            )
            + ". The local SmolLM2 model cannot write them. A small model behind a local llama.cpp server (the "
            "OpenAI-compatible backend) answers in the right format when you tick the grammar option below."
        )

    def vote_summaries(self) -> list[tuple[Study, dict]]:
        """Per study, the votes it already has: shown before anything is generated."""
        return [(study, study_vote_summary(study=study)) for study in self.studies]

    def clean(self) -> dict:
        data = super().clean()
        kind, generator = data.get("kind"), data.get("generator")
        if data.get("method") == "model" and not generator:
            self.add_error("generator", "choose the LLM judge configuration whose model generates")
        if kind and (refusal := method_refusal(kind=kind, method=data.get("method", ""))):
            self.add_error("method", refusal)
        model_asked = data.get("method") == "model" and kind and generator
        if model_asked and kind_wants_errors(kind) and not generator_can_write_errors(generator):
            self.add_error(
                "generator",
                f"{generator} runs the local SmolLM2 model, which cannot write {kind.slug} variants (it fails "
                "every question); choose a configuration on the OpenAI-compatible or Anthropic backend.",
            )
        if data.get("constrain_format"):
            if data.get("method") != "model":
                self.add_error(
                    "constrain_format", "only a model's reply is constrained by a grammar: choose method model"
                )
            elif generator and (refusal := grammar_refusal(generator)):
                self.add_error("constrain_format", refusal)
        if kind and not data.get("new_group"):
            for study in self.studies:
                voted = questions_with_voted_items(study=study, kind=kind)
                questions = study.questions.filter(is_gold=False).count()
                if questions and len(voted) >= questions:
                    self.add_error(
                        "kind",
                        f"every question of {study.title} already has a {kind.slug} item with votes, so no new "
                        f'{kind.slug} variant could ever be approved there. Tick "As a new group" to make new '
                        "items that start from zero votes.",
                    )
        return data


class KindForm(forms.ModelForm):
    """A perturbation kind in the admin: a compound's steps are typed as slugs, not as JSON."""

    class Meta:
        model = PerturbationKind
        fields = ["slug", "name", "semantics", "steps", "study", "description", "model_prompt"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Only when editable: a built-in kind's steps are read-only (its identity is code).
        if "steps" in self.fields:
            self.initial["steps"] = ", ".join(self.instance.steps or [])
            self.fields["steps"] = forms.CharField(
                required=False,
                help_text="For a compound kind: the slugs of its steps in the order they are applied, separated by "
                "commas (e.g. reference, rich_content). Empty for a kind made in one step.",
            )

    def clean_steps(self) -> list[str]:
        slugs = [part.strip() for part in self.cleaned_data.get("steps", "").split(",") if part.strip()]
        known = set(PerturbationKind.objects.values_list("slug", flat=True))
        unknown = [slug for slug in slugs if slug not in known]
        if unknown:
            raise forms.ValidationError(f"unknown kind(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        if self.cleaned_data.get("slug") in slugs:
            raise forms.ValidationError("a kind cannot be one of its own steps")
        return slugs


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
        widget=forms.Textarea(attrs={"rows": 18, "cols": 100}),
        strip=False,
        max_length=MAX_TEXT_CHARS,
        validators=[validate_markdown],
    )
    note = forms.CharField(required=False, max_length=2000, help_text="Why you changed it (kept with the revision).")


class ContextEditForm(forms.Form):
    """What a context kind's variant tells the judges: one line naming the answers {A1} and {A2}."""

    context = forms.CharField(
        max_length=Answer._meta.get_field("context").max_length,
        validators=[validate_context],
        widget=forms.TextInput(attrs={"size": 100}),
        help_text=Answer._meta.get_field("context").help_text,
    )
    note = forms.CharField(required=False, max_length=2000, help_text="Why you changed it (kept with the revision).")
