"""What the API shows of each model and of each service's result. Read-only: writes go through
service functions, whose inputs are parsed by the serializers in api/inputs.py."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotations.models import Answer, ComparisonItem, Judge, Question, Rater, Study, Vote, pseudonym
from judges.models import JudgeRun, LLMJudge


class StudySerializer(serializers.ModelSerializer):
    # Blank when unset, which the "uri" format a URLField would declare does not allow.
    prolific_completion_url = serializers.CharField(read_only=True, help_text="A URL, or empty.")
    platform_completion_url = serializers.CharField(
        read_only=True, help_text="Any other platform's completion URL ({code}: the rater's code), or empty."
    )

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
            "fast_notice",
            "lease_seconds",
            "one_variant_per_question",
            "gold_every",
            "gold_min_accuracy",
            "max_length_ratio",
            "completion_code",
            "per_rater_codes",
            "prolific_completion_url",
            "platform_completion_url",
            "allow_mturk_frame",
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
            "context",
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
        fields = [
            "id",
            "study",
            "question",
            "question_external_id",
            "group",
            "kind",
            "answer_a1",
            "answer_a2",
            "created_at",
        ]
        read_only_fields = fields


class RaterSerializer(serializers.ModelSerializer):
    """Pseudonymous: R<id>, never the platform's participant id or session data (those are in
    the payment file only)."""

    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pseudonym = serializers.CharField(read_only=True, help_text="R<id>, as in the votes CSV.")
    n_votes = serializers.IntegerField(read_only=True)

    class Meta:
        model = Rater
        fields = [
            "id",
            "study",
            "pseudonym",
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
    pseudonym = serializers.SerializerMethodField(help_text="The rater's pseudonym R<id>, for human votes.")
    run = serializers.IntegerField(
        source="run_id", read_only=True, allow_null=True, help_text="The judge run that wrote the vote."
    )

    class Meta:
        model = Vote
        fields = [
            "id",
            "study",
            "item",
            "group",
            "judge",
            "rater",
            "pseudonym",
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
            "labels_swapped",
            "raw_output",
            "parse_status",
            "option_probs",
            "error",
            "meta",
        ]
        read_only_fields = fields

    def get_pseudonym(self, vote: Vote) -> str | None:
        return pseudonym(vote.rater_id) or None


# --------------------------------------------------------------------------- LLM judges and runs


class LLMJudgeSerializer(serializers.ModelSerializer):
    """An LLM judge's configuration. Keys are never stored, only the name of the environment
    variable that holds one (`api_key_env`), which is shown."""

    name = serializers.CharField(source="judge.name", read_only=True)
    # Blank means the provider's own URL, so not a URI field: the schema said "format: uri" and
    # the answer held "" for every judge on a hosted provider.
    base_url = serializers.CharField(read_only=True, help_text="A URL, or empty for the provider's own.")

    class Meta:
        model = LLMJudge
        fields = ["id", "judge", "name", *LLMJudge.RUN_FIELDS, "price_in_per_mtok", "price_out_per_mtok"]
        read_only_fields = fields


class RunErrorSerializer(serializers.Serializer):
    item = serializers.IntegerField()
    round = serializers.IntegerField()
    error = serializers.CharField()

    def to_representation(self, instance):
        item, round_, error = instance
        return {"item": item, "round": round_, "error": error}


class ProgressSerializer(serializers.Serializer):
    """JudgeRun.progress(), the figures the admin's live run page shows."""

    done = serializers.IntegerField(help_text="Votes received so far.")
    invalid = serializers.IntegerField(help_text="Votes whose answer could not be parsed.")
    failed = serializers.IntegerField(help_text="Votes whose request failed.")
    cached = serializers.IntegerField(help_text="Votes answered from the response cache.")
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    total = serializers.IntegerField(help_text="Votes planned.")
    remaining = serializers.IntegerField()
    percent = serializers.FloatField()
    votes_per_second = serializers.FloatField(help_text="Over the last 30 seconds of the run.")
    eta_seconds = serializers.FloatField(allow_null=True)
    cost = serializers.FloatField(allow_null=True, help_text="From the judge's prices, when it has them.")
    last_errors = RunErrorSerializer(many=True, help_text="The five latest errors.")


class JudgeRunSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    judge_name = serializers.CharField(source="judge.name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    progress = serializers.SerializerMethodField(help_text="Live figures, read at each request.")
    can_cancel = serializers.BooleanField(read_only=True)
    can_resume = serializers.BooleanField(read_only=True)
    is_stale = serializers.BooleanField(read_only=True, help_text="Running, but its worker has not been heard of.")

    class Meta:
        model = JudgeRun
        fields = [
            "id",
            "study",
            "judge",
            "judge_name",
            "status",
            "total",
            "progress",
            "can_cancel",
            "can_resume",
            "is_stale",
            "retry_failed",
            "error",
            "config",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run: JudgeRun) -> dict:
        return ProgressSerializer(run.progress()).data


# --------------------------------------------------------------------------- perturbations


class VariantSerializer(AnswerSerializer):
    """A perturbed answer with its checks and review status, and the item it is in once approved."""

    item = serializers.IntegerField(
        source="item_id", read_only=True, allow_null=True, help_text="Its comparison item, once approved."
    )

    class Meta(AnswerSerializer.Meta):
        fields = [*AnswerSerializer.Meta.fields, "item"]
        read_only_fields = fields


class GenerateFailureSerializer(serializers.Serializer):
    question = serializers.CharField(help_text="External id of the question.")
    error = serializers.CharField()

    def to_representation(self, instance):
        question, error = instance
        return {"question": question, "error": error}


class GenerateResultSerializer(serializers.Serializer):
    """perturbations.services.GenerateResult: what a rule-based generation did."""

    created = VariantSerializer(many=True, help_text="The new variants, pending review.")
    flagged = serializers.SerializerMethodField(help_text="Ids of the new variants whose checks gave warnings.")
    skipped = serializers.ListField(child=serializers.CharField(), help_text="External ids that already existed.")
    failed = GenerateFailureSerializer(many=True, help_text="Questions that got no variant, and why.")

    def get_flagged(self, result) -> list[int]:
        return [answer.pk for answer in result.flagged]


class GenerateQueuedSerializer(serializers.Serializer):
    queued = serializers.BooleanField()
    detail = serializers.CharField()


class ReviewResultSerializer(serializers.Serializer):
    answer = VariantSerializer()
    item = serializers.IntegerField(allow_null=True, help_text="The comparison item after an approval, else null.")
