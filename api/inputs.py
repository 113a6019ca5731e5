"""Every input the API takes, parsed before a view uses it: query-string filters and the import
form. A bad value is a 400 naming the parameter, never a silent empty list or a 500."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from rest_framework import serializers
from rest_framework.fields import empty

from annotations.models import Answer, Judge, PerturbationKind, Rater, Study
from annotations.study_files import READERS
from api.pagination import MAX_ID
from biasstudy.limits import BOOTSTRAP_MAX, SEED_MAX, VOTES_PER_ITEM_MAX
from judges.models import JudgeRun, LLMJudge
from perturbations.services import (
    DECISIONS,
    METHODS,
    PerturbationError,
    grammar_refusal,
    kind_for_study,
    method_refusal,
)
from vote_imports.vote_import import UPLOAD_FORMATS


def _id_field(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text=help_text)


def _study_field() -> serializers.SlugField:
    return serializers.SlugField(required=False, max_length=80, help_text="Slug of a study.")


def _group_field() -> serializers.SlugField:
    return serializers.SlugField(
        required=False, max_length=64, help_text='"control", "gold" or a perturbation kind\'s slug.'
    )


class QueryFilter(serializers.Serializer):
    """A query-string filter: `SomeFilter(data=request.query_params).filter(queryset)`.

    `lookups` maps each parameter to the ORM lookup its value is matched with; `group` (a
    group of items) is matched through `group_q` from the model at `group_prefix`.
    """

    lookups: dict[str, str] = {}
    group_prefix = ""

    def __init__(self, data=empty, **kwargs):
        # A plain dict: with a QueryDict DRF reads a missing boolean as False.
        super().__init__(data=data.dict() if hasattr(data, "dict") else data, **kwargs)

    def filter(self, queryset: QuerySet) -> QuerySet:
        self.is_valid(raise_exception=True)
        for name, value in self.validated_data.items():
            queryset = queryset.filter(self.condition(name, value))
        return queryset

    def condition(self, name: str, value: Any) -> Q:
        if name == "group":
            return group_q(value, self.group_prefix)
        return Q(**{self.lookups[name]: value})

    def validate_study(self, slug: str) -> Study:
        study = Study.objects.filter(slug=slug).first()
        if study is None:
            raise serializers.ValidationError(f"No study with slug {slug!r}.")
        return study

    def validate_group(self, group: str) -> str:
        if group not in ("control", "gold") and not PerturbationKind.objects.filter(slug=group).exists():
            raise serializers.ValidationError(f"No group {group!r}: use control, gold or a perturbation kind's slug.")
        return group


def group_q(group: str, prefix: str = "") -> Q:
    """The items of one group (`prefix` reaches the item from another model, e.g. "item__")."""
    if group == "gold":
        return Q(**{f"{prefix}question__is_gold": True})
    if group == "control":
        return Q(**{f"{prefix}kind__isnull": True, f"{prefix}question__is_gold": False})
    return Q(**{f"{prefix}kind__slug": group})


class VoteFilter(QueryFilter):
    study = _study_field()
    judge = _id_field("Id of a judge.")
    group = _group_field()
    rater = _id_field("Id of a rater.")
    run = _id_field("Id of a judge run.")
    received_since = serializers.DateTimeField(required=False, help_text="Votes received at or after this time.")
    received_before = serializers.DateTimeField(required=False, help_text="Votes received before this time.")

    lookups = {
        "study": "item__study",
        "judge": "judge_id",
        "rater": "rater_id",
        "run": "run_id",
        "received_since": "received_at__gte",
        "received_before": "received_at__lt",
    }
    group_prefix = "item__"

    def validate_judge(self, pk: int) -> int:
        if not Judge.objects.filter(pk=pk).exists():
            raise serializers.ValidationError(f"No judge with id {pk}.")
        return pk

    def validate_rater(self, pk: int) -> int:
        if not Rater.objects.filter(pk=pk).exists():
            raise serializers.ValidationError(f"No rater with id {pk}.")
        return pk

    def validate(self, attrs: dict) -> dict:
        since, before = attrs.get("received_since"), attrs.get("received_before")
        if since and before and since >= before:
            raise serializers.ValidationError({"received_before": ["Must be later than received_since."]})
        return attrs


class AnswerFilter(QueryFilter):
    review_status = serializers.ChoiceField(choices=Answer.Review.choices, required=False)
    kind = serializers.SlugField(required=False, max_length=64, help_text="Variants of this perturbation kind.")
    original = serializers.BooleanField(required=False, help_text="true: originals only; false: variants only.")
    question = _id_field("Id of a question.")

    lookups = {
        "review_status": "review_status",
        "kind": "kind__slug",
        "original": "derived_from__isnull",
        "question": "question_id",
    }


class ItemFilter(QueryFilter):
    group = _group_field()


class RaterFilter(QueryFilter):
    flagged = serializers.BooleanField(required=False)

    lookups = {"flagged": "flagged"}


class JudgeFilter(QueryFilter):
    study = serializers.SlugField(
        required=False, max_length=80, help_text="Judges that can vote on this study: its own and the global ones."
    )
    kind = serializers.ChoiceField(choices=Judge.Kind.choices, required=False)

    lookups = {"kind": "kind"}

    def condition(self, name: str, value: Any) -> Q:
        if name == "study":
            return Q(study=value) | Q(study__isnull=True)
        return super().condition(name, value)


class StudyImportOptions(serializers.Serializer):
    """Overrides of the file's own settings, as with `import_study --slug/--title/--status`."""

    slug = serializers.SlugField(required=False, max_length=80)
    title = serializers.CharField(required=False, max_length=200)
    status = serializers.ChoiceField(choices=Study.Status.choices, required=False)


class StudyImportUpload(StudyImportOptions):
    file = serializers.FileField(
        help_text="biasstudy: the JSON document. chen2024: a zip of the folder (raw.json and one file per kind)."
    )
    format = serializers.ChoiceField(choices=sorted(READERS), default="biasstudy")


class VotesImportUpload(serializers.Serializer):
    """`manage.py import_votes FILE --format F --study S [--create --title T --add-to-collecting
    --for-raters]` as a form."""

    file = serializers.FileField(
        help_text="The vote file (docs/VOTE_FILES.md); for mtbench, prd and llmbar a zip of the data set's folder."
    )
    format = serializers.ChoiceField(choices=list(UPLOAD_FORMATS), default="csv")
    study = serializers.SlugField(max_length=80, help_text="Slug of the study the votes go into.")
    create = serializers.BooleanField(default=False, help_text="Make the study when there is none by that slug.")
    title = serializers.CharField(required=False, max_length=200, help_text="Title of a study made by `create`.")
    add_to_collecting = serializers.BooleanField(
        default=False,
        help_text="Let the import add items (pairs) to a study collecting votes from people; without it such a "
        "file is refused.",
    )
    for_raters = serializers.BooleanField(
        default=False,
        help_text="Hand the items the import adds to raters; without it they are for the file's judges and LLM "
        "judges only.",
    )


# --------------------------------------------------------------------------- judge runs


class RunFilter(QueryFilter):
    study = _study_field()
    judge = _id_field("Id of a judge.")
    status = serializers.ChoiceField(choices=JudgeRun.Status.choices, required=False)

    lookups = {"study": "study", "judge": "judge_id", "status": "status"}


class RunStartInput(serializers.Serializer):
    """What the admin's start form asks for; judges.services.judge_run_start decides the rest."""

    study = serializers.SlugRelatedField(slug_field="slug", queryset=Study.objects.all(), help_text="Slug of a study.")
    judge = serializers.PrimaryKeyRelatedField(
        queryset=Judge.objects.all(), help_text="Id of an LLM judge (the `judge` of /api/v1/llm-judges/)."
    )
    votes_per_item = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=VOTES_PER_ITEM_MAX,
        help_text="Omitted: the judge's own setting.",
    )


class RunResumeInput(serializers.Serializer):
    retry_failed = serializers.BooleanField(
        default=False, help_text="Ask again for the votes whose request failed, not only for the missing ones."
    )


# --------------------------------------------------------------------------- metrics


class MetricsOptions(serializers.Serializer):
    """The `analyze` command's options beyond the dashboard's filters (same defaults)."""

    bootstrap = serializers.IntegerField(
        required=False,
        default=1000,
        min_value=0,
        max_value=BOOTSTRAP_MAX,
        help_text="Bootstrap resamples (default 1000).",
    )
    seed = serializers.IntegerField(required=False, default=0, min_value=0, max_value=SEED_MAX)


# --------------------------------------------------------------------------- perturbations


class PerturbationGenerateInput(serializers.Serializer):
    """The admin's generate form, for one study (the study in the URL)."""

    kind = serializers.SlugField(max_length=64, help_text="A built-in perturbation kind or one of the study's own.")
    seed = serializers.IntegerField(min_value=0, max_value=SEED_MAX)
    method = serializers.ChoiceField(choices=[(m, m) for m in METHODS], default="rule")
    of = serializers.ChoiceField(
        choices=[("a2", "the second original"), ("a1", "the first original")],
        default="a2",
        help_text="Which original answer to perturb.",
    )

    generator = serializers.CharField(
        required=False,
        max_length=120,
        help_text="With method `model`: the name of the LLM judge configuration that rewrites (default: the local SmolLM2 one).",
    )

    constrain_format = serializers.BooleanField(
        required=False,
        default=False,
        help_text="With method `model` and a generator on the OpenAI-compatible backend (e.g. llama.cpp's server): "
        "send a GBNF grammar so the reply can only be the fenced blocks the generator reads.",
    )

    def validate_kind(self, slug: str) -> PerturbationKind:
        try:
            return kind_for_study(study=self.context["study"], slug=slug)
        except PerturbationError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_generator(self, name: str) -> LLMJudge:
        found = LLMJudge.objects.select_related("judge").filter(judge__name=name).first()
        if found is None:
            known = ", ".join(LLMJudge.objects.values_list("judge__name", flat=True)) or "none yet"
            raise serializers.ValidationError(f"no LLM judge configuration named {name!r} (known: {known})")
        return found

    def validate(self, attrs: dict) -> dict:
        if attrs.get("generator") is not None and attrs.get("method") != "model":
            raise serializers.ValidationError({"generator": "only with method 'model'"})
        if refusal := method_refusal(kind=attrs["kind"], method=attrs.get("method", "rule")):
            raise serializers.ValidationError({"method": refusal})
        if attrs.get("constrain_format"):
            refusal = (
                "only with method 'model'"
                if attrs.get("method") != "model"
                else grammar_refusal(attrs.get("generator"))
            )
            if refusal:
                raise serializers.ValidationError({"constrain_format": refusal})
        return attrs


class VariantFilter(QueryFilter):
    kind = serializers.SlugField(required=False, max_length=64, help_text="Variants of this perturbation kind.")
    review_status = serializers.ChoiceField(choices=Answer.Review.choices, required=False)
    flagged = serializers.BooleanField(
        required=False, help_text="true: only variants whose checks gave warnings; false: only clean ones."
    )

    lookups = {"kind": "kind__slug", "review_status": "review_status"}

    def condition(self, name: str, value: Any) -> Q:
        if name == "flagged":
            # As GenerateResult.flagged reads it: checks without "ok" (never run) are no warning.
            return Q(checks__ok=False) if value else Q(checks__ok=True) | ~Q(checks__has_key="ok")
        return super().condition(name, value)


class ReviewInput(serializers.Serializer):
    decision = serializers.ChoiceField(choices=[(d, d) for d in DECISIONS])
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")
