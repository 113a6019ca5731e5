"""Every input the API takes, parsed before a view uses it: query-string filters and the import
form. A bad value is a 400 naming the parameter, never a silent empty list or a 500."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from rest_framework import serializers
from rest_framework.fields import empty

from annotations.models import Answer, Judge, Rater, Study
from annotations.study_io import READERS
from api.pagination import MAX_ID
from perturbations.models import PerturbationKind


def _id_field(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text=help_text)


def _study_field() -> serializers.SlugField:
    return serializers.SlugField(required=False, max_length=80, help_text="Slug of a study.")


def _group_field() -> serializers.SlugField:
    return serializers.SlugField(
        required=False, max_length=64, help_text='"control", "gold" or a perturbation kind\'s slug.'
    )


class QueryFilter(serializers.Serializer):
    """A query-string filter: `QueryFilter(data=request.query_params).filter(queryset)`."""

    def __init__(self, data=empty, **kwargs):
        # A plain dict: with a QueryDict DRF reads a missing boolean as False.
        super().__init__(data=data.dict() if hasattr(data, "dict") else data, **kwargs)

    def filter(self, queryset: QuerySet) -> QuerySet:
        self.is_valid(raise_exception=True)
        return self.apply(queryset, self.validated_data)

    def apply(self, queryset: QuerySet, values: dict[str, Any]) -> QuerySet:
        raise NotImplementedError

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

    def apply(self, queryset: QuerySet, values: dict[str, Any]) -> QuerySet:
        if "study" in values:
            queryset = queryset.filter(item__study=values["study"])
        for field in ("judge", "rater", "run"):
            if field in values:
                queryset = queryset.filter(**{f"{field}_id": values[field]})
        if "group" in values:
            queryset = queryset.filter(group_q(values["group"], "item__"))
        if "received_since" in values:
            queryset = queryset.filter(received_at__gte=values["received_since"])
        if "received_before" in values:
            queryset = queryset.filter(received_at__lt=values["received_before"])
        return queryset


class AnswerFilter(QueryFilter):
    review_status = serializers.ChoiceField(choices=Answer.Review.choices, required=False)
    kind = serializers.SlugField(required=False, max_length=64, help_text="Variants of this perturbation kind.")
    original = serializers.BooleanField(required=False, help_text="true: originals only; false: variants only.")
    question = _id_field("Id of a question.")

    def apply(self, queryset: QuerySet, values: dict[str, Any]) -> QuerySet:
        if "review_status" in values:
            queryset = queryset.filter(review_status=values["review_status"])
        if "kind" in values:
            queryset = queryset.filter(kind__slug=values["kind"])
        if "original" in values:
            queryset = queryset.filter(derived_from__isnull=values["original"])
        if "question" in values:
            queryset = queryset.filter(question_id=values["question"])
        return queryset


class ItemFilter(QueryFilter):
    group = _group_field()

    def apply(self, queryset: QuerySet, values: dict[str, Any]) -> QuerySet:
        return queryset.filter(group_q(values["group"])) if "group" in values else queryset


class RaterFilter(QueryFilter):
    flagged = serializers.BooleanField(required=False)

    def apply(self, queryset: QuerySet, values: dict[str, Any]) -> QuerySet:
        return queryset.filter(flagged=values["flagged"]) if "flagged" in values else queryset


class JudgeFilter(QueryFilter):
    study = serializers.SlugField(
        required=False, max_length=80, help_text="Judges that can vote on this study: its own and the global ones."
    )
    kind = serializers.ChoiceField(choices=Judge.Kind.choices, required=False)

    def apply(self, queryset: QuerySet, values: dict[str, Any]) -> QuerySet:
        if "study" in values:
            queryset = queryset.filter(Q(study=values["study"]) | Q(study__isnull=True))
        if "kind" in values:
            queryset = queryset.filter(kind=values["kind"])
        return queryset


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
