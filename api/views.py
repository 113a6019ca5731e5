"""The API's views. Thin: parse the input (api.inputs), call the service, serialize.

Class-based (DRF generic views) rather than the house's function views: the generic views give
pagination and let drf-spectacular read each endpoint's serializers into the OpenAPI schema.
Every view needs a staff user (settings.REST_FRAMEWORK) and is throttled per token.
"""

from __future__ import annotations

from django.db.models import Case, CharField, Count, F, QuerySet, Value, When
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.models import Answer, ComparisonItem, Judge, Question, Rater, Study, Vote
from annotations.study_io import StudyFileError, study_export
from api import inputs, serializers
from api.pagination import MAX_ID, IdCursorPagination, VoteCursorPagination
from api.schema import ErrorSerializer
from api.services import UploadTooLarge, study_import_upload


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The upload is too large."


def study_file_error_body(exc: StudyFileError) -> dict:
    return {"detail": exc.message, "path": exc.path, "line": exc.line, "field": exc.field}


def not_found(request, *args, **kwargs) -> JsonResponse:
    return JsonResponse({"detail": "No such API endpoint (see /api/docs/)."}, status=404)


# --------------------------------------------------------------------------- base classes


class ListView(generics.ListAPIView):
    """A list filtered by `filter_class` (a query-string serializer) and paged by id cursor."""

    pagination_class = IdCursorPagination
    filter_class: type[inputs.QueryFilter] | None = None

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        if self.filter_class is None:
            return queryset
        return self.filter_class(data=self.request.query_params).filter(queryset)


class StudyListView(ListView):
    """A list scoped to the study named in the URL (404 when there is none)."""

    study_lookup = "study"

    def get_queryset(self) -> QuerySet:
        study = get_object_or_404(Study, slug=self.kwargs["slug"])
        return super().get_queryset().filter(**{self.study_lookup: study})


class DetailView(generics.RetrieveAPIView):
    def get_object(self):
        # Ids beyond what the database stores cannot exist (and would overflow the query).
        if self.kwargs.get("pk", 0) > MAX_ID:
            raise Http404
        return super().get_object()


def _with_filters(filter_class: type[inputs.QueryFilter]):
    return extend_schema(parameters=[filter_class])


# --------------------------------------------------------------------------- studies


class StudyDocumentParser(BaseParser):
    """Leaves a JSON body unread for the importer, which reads it bounded in size and reports
    syntax errors with their line, exactly as for a file."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        return RawBody(stream)


class RawBody:
    def __init__(self, stream):
        self.stream = stream


class StudiesView(ListView):
    queryset = Study.objects.all()
    serializer_class = serializers.StudySerializer

    def get_parsers(self):
        if self.request is not None and self.request.method == "POST":
            return [StudyDocumentParser(), MultiPartParser()]
        return super().get_parsers()

    @extend_schema(
        summary="Import a study",
        description=(
            "Same formats and checks as `manage.py import_study`; nothing is written unless the whole "
            "file is valid. Send either the biasstudy JSON document as the body (`application/json`, "
            "overrides in the query string), or a form (`multipart/form-data`) with `file`, `format` "
            "(biasstudy, or chen2024 with a zip of the folder) and the optional overrides."
        ),
        parameters=[inputs.StudyImportOptions],
        request={"application/json": OpenApiTypes.OBJECT, "multipart/form-data": inputs.StudyImportUpload},
        responses={
            201: serializers.StudySerializer,
            413: ErrorSerializer,
            415: ErrorSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        if isinstance(request.data, RawBody):
            options = inputs.StudyImportOptions(data=request.query_params.dict())
            options.is_valid(raise_exception=True)
            upload = {"stream": request.data.stream, "fmt": "biasstudy", "name": "request body"}
        elif request.content_type.startswith("application/json"):
            raise ValidationError({"detail": "The request body is empty: send the biasstudy JSON document."})
        else:
            options = inputs.StudyImportUpload(data=request.data)
            options.is_valid(raise_exception=True)
            file = options.validated_data["file"]
            upload = {"stream": file, "fmt": options.validated_data["format"], "name": file.name or "upload"}
        overrides = {key: options.validated_data.get(key) for key in ("slug", "title", "status")}
        try:
            study = study_import_upload(**upload, **overrides)
        except StudyFileError as exc:
            return Response(study_file_error_body(exc), status=status.HTTP_400_BAD_REQUEST)
        except UploadTooLarge as exc:
            raise PayloadTooLarge(f"The upload is {exc}.") from None
        location = reverse("api:study-detail", kwargs={"slug": study.slug})
        return Response(
            serializers.StudySerializer(study).data, status=status.HTTP_201_CREATED, headers={"Location": location}
        )


class StudyDetailView(DetailView):
    queryset = Study.objects.all()
    serializer_class = serializers.StudySerializer
    lookup_field = "slug"


class StudyExportView(APIView):
    @extend_schema(
        summary="Export a study",
        description="The study as a biasstudy JSON document (docs/STUDY_FORMAT.md); importing it gives it back.",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        return Response(study_export(study=study))


QUESTIONS = Question.objects.select_related("study")
ANSWERS = Answer.objects.select_related("question", "kind").defer("question__text")
ITEMS = ComparisonItem.objects.select_related("study", "question", "kind").defer("question__text")
RATERS = Rater.objects.select_related("study").annotate(n_votes=Count("votes"))
JUDGES = Judge.objects.select_related("study")
# Votes with what a reader needs from the related rows, as columns of the same query.
VOTES = Vote.objects.annotate(
    study_slug=F("item__study__slug"),
    group=Case(
        When(item__question__is_gold=True, then=Value("gold")),
        When(item__kind__isnull=True, then=Value("control")),
        default=F("item__kind__slug"),
        output_field=CharField(),
    ),
    participant_id=F("rater__participant_id"),
)


class StudyQuestionsView(StudyListView):
    queryset = QUESTIONS
    serializer_class = serializers.QuestionSerializer


@_with_filters(inputs.AnswerFilter)
class StudyAnswersView(StudyListView):
    queryset = ANSWERS
    study_lookup = "question__study"
    serializer_class = serializers.AnswerSerializer
    filter_class = inputs.AnswerFilter


@_with_filters(inputs.ItemFilter)
class StudyItemsView(StudyListView):
    queryset = ITEMS
    serializer_class = serializers.ItemSerializer
    filter_class = inputs.ItemFilter


@_with_filters(inputs.RaterFilter)
class StudyRatersView(StudyListView):
    queryset = RATERS
    serializer_class = serializers.RaterSerializer
    filter_class = inputs.RaterFilter


# --------------------------------------------------------------------------- by id


class QuestionDetailView(DetailView):
    queryset = QUESTIONS
    serializer_class = serializers.QuestionSerializer


class AnswerDetailView(DetailView):
    queryset = ANSWERS
    serializer_class = serializers.AnswerSerializer


class ItemDetailView(DetailView):
    queryset = ITEMS
    serializer_class = serializers.ItemSerializer


class RaterDetailView(DetailView):
    queryset = RATERS
    serializer_class = serializers.RaterSerializer


# --------------------------------------------------------------------------- judges and votes


@_with_filters(inputs.JudgeFilter)
class JudgesView(ListView):
    queryset = JUDGES
    serializer_class = serializers.JudgeSerializer
    filter_class = inputs.JudgeFilter


class JudgeDetailView(DetailView):
    queryset = JUDGES
    serializer_class = serializers.JudgeSerializer


@_with_filters(inputs.VoteFilter)
class VotesView(ListView):
    """All votes, oldest id first, 500 a page (page_size up to 5000)."""

    queryset = VOTES
    serializer_class = serializers.VoteSerializer
    filter_class = inputs.VoteFilter
    pagination_class = VoteCursorPagination


class VoteDetailView(DetailView):
    queryset = VOTES
    serializer_class = serializers.VoteSerializer
