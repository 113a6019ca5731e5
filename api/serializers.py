"""What the API shows of each model. Read-only: writes go through service functions, whose
inputs are parsed by the serializers in api/inputs.py."""

from __future__ import annotations

from rest_framework import serializers

from annotations.models import Answer, ComparisonItem, Judge, Question, Rater, Study, Vote


class StudySerializer(serializers.ModelSerializer):
    # Blank when unset, which the "uri" format a URLField would declare does not allow.
    prolific_completion_url = serializers.CharField(read_only=True, help_text="A URL, or empty.")

    class Meta:
        model = Study
        fields = [
            "id",
            "slug",
            "title",
            "status",
            "instructions",
            "consent",
            "votes_per_item",
            "target_per_rater",
            "min_response_ms",
            "ms_per_word",
            "lease_seconds",
            "one_variant_per_question",
            "gold_every",
            "gold_min_accuracy",
            "max_length_ratio",
            "completion_code",
            "prolific_completion_url",
            "created_at",
        ]
        read_only_fields = fields


class QuestionSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Question
        fields = ["id", "study", "external_id", "text", "bloom_level", "is_gold"]
        read_only_fields = fields


class LengthsSerializer(serializers.Serializer):
    words = serializers.IntegerField(source="len_words")
    chars = serializers.IntegerField(source="len_chars")
    bpe = serializers.IntegerField(source="len_bpe", allow_null=True)


class AnswerSerializer(serializers.ModelSerializer):
    question_external_id = serializers.CharField(source="question.external_id", read_only=True)
    kind = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    is_original = serializers.BooleanField(read_only=True)
    lengths = LengthsSerializer(source="*", read_only=True)

    class Meta:
        model = Answer
        fields = [
            "id",
            "question",
            "question_external_id",
            "external_id",
            "text",
            "is_original",
            "derived_from",
            "kind",
            "review_status",
            "provenance",
            "inserted_errors",
            "checks",
            "lengths",
            "created_at",
        ]
        read_only_fields = fields


class ItemSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    question_external_id = serializers.CharField(source="question.external_id", read_only=True)
    group = serializers.CharField(read_only=True, help_text='"control", "gold" or the perturbation kind\'s slug.')
    kind = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = ComparisonItem
        fields = ["id", "study", "question", "question_external_id", "group", "kind", "answer_a1", "answer_a2", "created_at"]
        read_only_fields = fields


class RaterSerializer(serializers.ModelSerializer):
    """Pseudonymous: the participant id the platform gave, never the platform's session data."""

    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    n_votes = serializers.IntegerField(read_only=True)

    class Meta:
        model = Rater
        fields = [
            "id",
            "study",
            "participant_id",
            "source",
            "target",
            "n_votes",
            "flagged",
            "flag_reason",
            "gold_seen",
            "gold_correct",
            "consent_at",
            "created_at",
            "last_seen_at",
        ]
        read_only_fields = fields


class JudgeSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = Judge
        fields = ["id", "name", "kind", "study", "params", "created_at"]
        read_only_fields = fields


class VoteSerializer(serializers.ModelSerializer):
    # Annotated by the view's queryset (api.views.votes_queryset): one query per page.
    study = serializers.SlugField(source="study_slug", read_only=True)
    group = serializers.CharField(read_only=True, help_text='"control", "gold" or the perturbation kind\'s slug.')
    participant_id = serializers.CharField(read_only=True, allow_null=True, help_text="The rater's, for human votes.")

    class Meta:
        model = Vote
        fields = [
            "id",
            "study",
            "item",
            "group",
            "judge",
            "rater",
            "participant_id",
            "run",
            "round",
            "shown_first",
            "choice_shown",
            "choice",
            "not_familiar",
            "client_ms",
            "server_ms",
            "received_at",
            "label_scheme",
            "raw_output",
            "parse_status",
            "option_probs",
            "error",
            "meta",
        ]
        read_only_fields = fields
