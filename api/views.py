"""The API's views. Thin: parse the input (api.inputs), call the service, serialize.

Class-based (DRF generic views) rather than the house's function views: the generic views give
pagination and let drf-spectacular read each endpoint's serializers into the OpenAPI schema.
Every view needs a staff user with the model permissions of what it reads or writes
(settings.REST_FRAMEWORK: api.permissions; a view declares them in `model_permissions` or
takes them from its `queryset`) and is throttled per token.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import Case, CharField, Count, F, OuterRef, QuerySet, Subquery, Value, When
from django.http import Http404, HttpResponse, HttpResponsePermanentRedirect, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import current_report, exports, stored_reports
from analysis.forms import FilterForm
from annotations.models import Answer, ComparisonItem, Judge, Question, Rater, Study, Vote
from annotations.study_files import StudyFileError, study_export
from annotations.uploads import UploadError, UploadTooLarge, study_upload_get, study_upload_progress
from api import inputs, serializers
from api.pagination import MAX_ID, IdCursorPagination, VoteCursorPagination
from api.parsers import BoundedJSONParser
from api.schema import ErrorSerializer, form_parameters
from api.services import study_import_upload
from judges.models import JudgeRun, LLMJudge
from judges.services import JudgeRunError, judge_run_cancel, judge_run_resume, judge_run_start
from perturbations.models import Variant
from perturbations.services import (
    PerturbationError,
    answer_review,
    perturbation_generate,
)
from perturbations.tasks import perturbation_generate_queue
from vote_imports import importers, vote_import
from vote_imports.tasks import votes_upload_import_queue
from vote_imports.uploads import votes_upload_get, votes_upload_progress, votes_upload_store


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The upload is too large."


def study_file_error_body(exc: StudyFileError) -> dict:
    """The first problem at the top (as before there were several), then every problem."""
    problems = [{"detail": p.message, "path": p.path, "line": p.line, "field": p.field} for p in exc.problems]
    return {**problems[0], "problems": problems, "more": exc.more}


@csrf_exempt  # it changes nothing; Django's CSRF check answered a POST with its HTML 403 page
def not_found(request, *args, **kwargs) -> HttpResponse:
    """Any other path under /api/: a JSON 404. A GET of an endpoint without its final slash is
    sent on to it, as APPEND_SLASH would do; a path that would only reach this view with a
    slash added is not (a malformed slug before ".csv" was redirected to a 404)."""
    if request.method in ("GET", "HEAD") and not request.path.endswith("/"):
        try:
            endpoint = resolve(request.path + "/").func
        except Resolver404:
            endpoint = not_found
        if endpoint is not not_found:
            query = request.META.get("QUERY_STRING", "")
            return HttpResponsePermanentRedirect(request.path + "/" + (f"?{query}" if query else ""))
    return JsonResponse({"detail": "No such API endpoint (see /api/docs/)."}, status=404)


class ApiRootView(APIView):
    """/api/v1/: every endpoint of this version, so that the API can be explored from its root."""

    patterns: tuple = ()  # the other endpoints of the version, given by the URLconf
    model_permissions = {"GET": ()}  # names and links only

    # Navigation, not data: left out of the schema (whose documentation page lists the same).
    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        base = request.build_absolute_uri(reverse("api:root"))  # patterns are added unquoted: <slug:slug>
        endpoints = [{"name": p.name, "url": base + str(p.pattern)} for p in self.patterns]
        return Response(
            {
                "endpoints": endpoints,
                "docs": request.build_absolute_uri(reverse("api:docs")),
                "schema": request.build_absolute_uri(reverse("api:schema")),
            }
        )


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
            202: OpenApiTypes.OBJECT,
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
            imported = study_import_upload(**upload, **overrides)
        except StudyFileError as exc:
            return Response(study_file_error_body(exc), status=status.HTTP_400_BAD_REQUEST)
        except UploadTooLarge as exc:
            raise PayloadTooLarge(f"The upload is {exc}.") from None
        if imported.queued is not None:
            url = request.build_absolute_uri(reverse("api:study-import", kwargs={"token": imported.queued.token}))
            return Response({"state": "queued", "url": url}, status=status.HTTP_202_ACCEPTED, headers={"Location": url})
        study = imported.study
        location = reverse("api:study-detail", kwargs={"slug": study.slug})
        return Response(
            serializers.StudySerializer(study).data, status=status.HTTP_201_CREATED, headers={"Location": location}
        )


class VotesImportView(APIView):
    parser_classes = [MultiPartParser]
    model_permissions = {"POST": ("annotations.add_vote",)}  # and add_study to `create` one

    @extend_schema(
        summary="Import votes",
        description=(
            "`manage.py import_votes FILE --format csv --study S [--create]` over HTTP, in the task worker: the "
            "same parser and writer, one transaction (nothing is written unless the whole file is valid, not even "
            "the study `create` would make). Folder formats (mtbench, prd, llmbar) are uploaded as a zip of the "
            "folder. The answer is a 202 whose `url` (also the Location header) gives the import's state: poll it "
            "until `state` is done (the counts) or failed (the problem, naming the file, line and field). A study "
            "that is not there (without `create`) or a zip that cannot be unpacked is a 400 at once."
        ),
        request={"multipart/form-data": inputs.VotesImportUpload},
        responses={202: OpenApiTypes.OBJECT, 400: ErrorSerializer, 413: ErrorSerializer},
    )
    def post(self, request: Request) -> Response:
        form = inputs.VotesImportUpload(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        if data["create"] and not request.user.has_perm("annotations.add_study"):
            raise PermissionDenied("Creating the study needs the permission to add studies.")
        file = data["file"]
        if file.size > settings.API_IMPORT_MAX_MB * 1024 * 1024:
            raise PayloadTooLarge(f"The upload is larger than the {settings.API_IMPORT_MAX_MB} MB the API accepts.")
        try:
            upload = votes_upload_store(
                chunks=file.chunks(),
                name=file.name or "upload",
                fmt=data["format"],
                slug=data["study"],
                user=request.user,
                create=data["create"],
                title=data.get("title") or "",
                add_to_collecting=data["add_to_collecting"],
                for_raters=data["for_raters"],
            )
        except vote_import.StudyNotFound as exc:
            return Response({"detail": str(exc), "field": "study"}, status=status.HTTP_400_BAD_REQUEST)
        except importers.ImportProblem as exc:
            return Response(study_file_error_body(exc), status=status.HTTP_400_BAD_REQUEST)
        votes_upload_import_queue(upload=upload)
        url = request.build_absolute_uri(reverse("api:votes-import-job", kwargs={"token": upload.token}))
        body = {**votes_import_state(votes_upload_progress(upload=upload), request), "url": url}
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": url})


class VotesImportJobView(APIView):
    model_permissions = {"GET": ("annotations.add_vote",)}  # following one's own import

    @extend_schema(
        summary="State of a vote import",
        description=(
            "`state` is queued, running (with the `step` under way, `done` of `total` steps and `percent`), "
            "done (`study`, `study_url`, the `counts`: questions, answers, items, judges, raters, votes, ..., and "
            "`ignored_columns`: each column of the file that was not imported, with why, such as the votes export's "
            "computed `counted`; `warnings`: what was imported but may not be what the file meant, such as a quoted "
            "field that spans lines and holds a row's commas, each naming its lines) "
            'or failed (nothing was written: the first problem as {"detail", "path", "line", "field"} and every '
            'problem in that shape in "problems", the first 200, with "more" counting the others). An unknown, '
            "expired or forged token is a 404."
        ),
        parameters=[
            # What django.core.signing writes: URL-safe base64 and colons.
            OpenApiParameter("token", OpenApiTypes.STR, OpenApiParameter.PATH, pattern=r"^[-A-Za-z0-9_:]+$")
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, token: str) -> Response:
        try:
            upload = votes_upload_get(token=token)
        except UploadError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        return Response(votes_import_state(votes_upload_progress(upload=upload), request))


def votes_import_state(progress: dict, request: Request) -> dict:
    """The upload's progress (vote_imports.uploads) as the API tells it."""
    state = {key: progress[key] for key in ("state", "step", "done", "total", "percent") if key in progress}
    state["steps"] = list(vote_import.VOTES_IMPORT_STEPS)
    if progress["state"] == "done":
        study_url = request.build_absolute_uri(reverse("api:study-detail", kwargs={"slug": progress["study"]}))
        counts = dict(progress["counts"])
        ignored = counts.pop(vote_import.IGNORED_COLUMNS, {})
        warnings = counts.pop(vote_import.WARNINGS, [])
        state.update(
            study=progress["study"], study_url=study_url, counts=counts, ignored_columns=ignored, warnings=warnings
        )
    elif progress["state"] == "failed":
        problems = _progress_problems(progress)
        state.update(problems[0], problems=problems, more=progress.get("more", 0))
    return state


def _progress_problems(progress: dict) -> list[dict]:
    """A failed import's problems (its upload's progress) in the API's shape."""
    return [
        {"detail": p["message"], "path": p["path"], "line": p["line"], "field": p["field"]}
        for p in progress.get("problems", [])
    ]


class StudyImportView(APIView):
    model_permissions = {"GET": ("annotations.add_study",)}  # following one's own import

    @extend_schema(
        summary="State of a study import",
        description=(
            "A study file of more than STUDY_UPLOAD_BACKGROUND_QUESTIONS questions is imported by the task worker, "
            "as the admin's upload is: the import answers 202 with this URL. `state` is queued, running (`done` of "
            "`total` rows, `percent`), done (`study`, `study_url`) or failed (nothing was written: `detail`, and "
            'for problems with the file each one as {"detail", "path", "line", "field"} in "problems"). An '
            "unknown, expired or forged token is a 404."
        ),
        parameters=[OpenApiParameter("token", OpenApiTypes.STR, OpenApiParameter.PATH, pattern=r"^[-A-Za-z0-9_:]+$")],
        responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer},
    )
    def get(self, request: Request, token: str) -> Response:
        try:
            progress = study_upload_progress(upload=study_upload_get(token=token))
        except UploadError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        state = {key: progress[key] for key in ("state", "done", "total", "percent") if key in progress}
        if progress["state"] == "done":
            url = request.build_absolute_uri(reverse("api:study-detail", kwargs={"slug": progress["study"]}))
            state.update(study=progress["study"], study_url=url)
        elif progress["state"] == "failed":
            problems = _progress_problems(progress)
            state.update(detail=progress.get("error", ""), problems=problems, more=progress.get("more", 0))
        return Response(state)


class StudyDetailView(DetailView):
    queryset = Study.objects.all()
    serializer_class = serializers.StudySerializer
    lookup_field = "slug"


class StudyExportView(APIView):
    model_permissions = {"GET": ("annotations.view_study", "annotations.view_question", "annotations.view_answer")}

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
)
# A vote names its rater by their platform id: reading votes needs reading raters too.
VOTE_PERMISSIONS = ("annotations.view_vote", "annotations.view_rater")


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
    model_permissions = {"GET": VOTE_PERMISSIONS}
    serializer_class = serializers.VoteSerializer
    filter_class = inputs.VoteFilter
    pagination_class = VoteCursorPagination


class VoteDetailView(DetailView):
    queryset = VOTES
    model_permissions = {"GET": VOTE_PERMISSIONS}
    serializer_class = serializers.VoteSerializer


def _by_id(queryset: QuerySet, pk: int):
    """One row by id, 404 for ids that cannot exist (beyond what the database stores)."""
    if pk > MAX_ID:
        raise Http404
    return get_object_or_404(queryset, pk=pk)


def service_error(exc: Exception) -> Response:
    """A service refused the operation (JudgeRunError, PerturbationError): its message, 400."""
    return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)


SERVICE_ERROR = OpenApiResponse(ErrorSerializer, description="Refused by the service, which says why in `detail`.")


# --------------------------------------------------------------------------- LLM judges and runs


LLM_JUDGES = LLMJudge.objects.select_related("judge")
RUNS = JudgeRun.objects.select_related("study", "judge", "created_by")


class LLMJudgesView(ListView):
    """LLM judge configurations; start a run with the `judge` id of one."""

    queryset = LLM_JUDGES
    serializer_class = serializers.LLMJudgeSerializer


class LLMJudgeDetailView(DetailView):
    queryset = LLM_JUDGES
    serializer_class = serializers.LLMJudgeSerializer


@_with_filters(inputs.RunFilter)
class RunsView(ListView):
    """Judge runs with live progress, oldest first. POST starts one, as the admin does."""

    queryset = RUNS
    serializer_class = serializers.JudgeRunSerializer
    filter_class = inputs.RunFilter

    @extend_schema(
        summary="Start a judge run",
        description=(
            "Queue a run of an LLM judge over every item of a study (judges.services.judge_run_start, as "
            "the admin's start form and `run_judge`). It runs in the task worker; poll "
            "`/api/v1/runs/{id}/` for its progress."
        ),
        request=inputs.RunStartInput,
        responses={201: serializers.JudgeRunSerializer, 400: SERVICE_ERROR},
    )
    def post(self, request: Request) -> Response:
        data = inputs.RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = judge_run_start(**data.validated_data, user=request.user)
        except JudgeRunError as exc:
            return service_error(exc)
        run = RUNS.get(pk=run.pk)
        location = reverse("api:run-detail", kwargs={"pk": run.pk})
        return Response(
            serializers.JudgeRunSerializer(run).data, status=status.HTTP_201_CREATED, headers={"Location": location}
        )


class RunDetailView(DetailView):
    queryset = RUNS
    serializer_class = serializers.JudgeRunSerializer


class RunCancelView(APIView):
    model_permissions = {"POST": ("judges.change_judgerun",)}

    @extend_schema(
        summary="Cancel a judge run",
        description="Stop a queued or running run; the votes it has are kept (judges.services.judge_run_cancel).",
        request=None,
        responses={200: serializers.JudgeRunSerializer, 400: SERVICE_ERROR},
    )
    def post(self, request: Request, pk: int) -> Response:
        run = _by_id(RUNS, pk)
        try:
            judge_run_cancel(run=run)
        except JudgeRunError as exc:
            return service_error(exc)
        return Response(serializers.JudgeRunSerializer(RUNS.get(pk=pk)).data)


class RunResumeView(APIView):
    model_permissions = {"POST": ("judges.change_judgerun",)}
    # Its one option has a default, so a form or multipart body that parses to nothing (any junk
    # does) resumed the run as if asked: a body, when there is one, is JSON (else 415).
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        summary="Resume a judge run",
        description=(
            "Queue a stopped, finished or dead run again; it asks only for the votes still missing and, "
            "with `retry_failed`, again for those whose request failed (judges.services.judge_run_resume)."
        ),
        request=inputs.RunResumeInput,
        responses={
            200: serializers.JudgeRunSerializer,
            400: SERVICE_ERROR,
            415: OpenApiResponse(ErrorSerializer, description="A body that is not JSON."),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        run = _by_id(RUNS, pk)
        data = inputs.RunResumeInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            judge_run_resume(run=run, retry_failed=data.validated_data["retry_failed"])
        except JudgeRunError as exc:
            return service_error(exc)
        return Response(serializers.JudgeRunSerializer(RUNS.get(pk=pk)).data)


# --------------------------------------------------------------------------- metrics and CSV exports


def analysis_form(request: Request, study: Study) -> FilterForm:
    """The query string parsed by the dashboard's own filter form (as `analyze` parses its options)."""
    form = FilterForm.for_study(request.query_params, study=study)
    if not form.is_valid():
        errors = form.errors.get_json_data()
        named = {("non_field_errors" if name == "__all__" else name): errs for name, errs in errors.items()}
        raise ValidationError({name: [e["message"] for e in errs] for name, errs in named.items()})
    return form


ANALYSIS_FILTERS = form_parameters(FilterForm)


class StudyMetricsView(APIView):
    model_permissions = {"GET": exports.METRICS_PERMISSIONS}

    @extend_schema(
        summary="Every metric of a study",
        description=(
            "The same JSON as `manage.py analyze --study {slug} --json` with the same filters and options "
            "(analysis.current_report.study_results; filters parsed by the dashboard's form). Its figures are `rows`, "
            "the metric table: one object per figure with the keys listed in `columns` (judge, kind, metric, "
            "group, bloom, subset, estimate, ci_lo, ci_hi, n, clusters, p_value, p_adjusted, convention, note; "
            "docs/STATISTICS.md names every metric), the same rows as the metrics CSV, and `figures`: each metric's "
            "label, section, format, definition and base by its name; beside them what they "
            "were computed from: `study`, `conventions`, `tests`, `filters`, `measure`, `groups` and `judges` "
            "(each judge's kind, votes and runs). With `computed_at` and `n_votes` (when and from how many of "
            "the study's votes it was computed) and `updating` (a study over the background threshold has "
            "changed since and its next report is being computed). Answered 202 with only those three keys "
            "while a big study's first report is being computed."
        ),
        parameters=[*ANALYSIS_FILTERS, inputs.MetricsOptions],
        responses={200: OpenApiTypes.OBJECT, 202: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        form = analysis_form(request, study)
        extra = inputs.MetricsOptions(data=request.query_params.dict())
        extra.is_valid(raise_exception=True)
        results = current_report.study_results(
            study=study, filters=form.filters(), options=form.options(**extra.validated_data)
        )
        # When and from how many votes it was computed; a big study's next report may be on its
        # way (updating), and its first one is answered 202 with no metrics until it is ready.
        computed = {
            "computed_at": results.computed_at.isoformat() if results.computed_at else None,
            "n_votes": results.n_votes,
            "updating": results.updating,
        }
        # Encoded as the command encodes it (dates and the like through str), so both agree.
        body = json.loads(json.dumps({**(results.report or {}), **computed}, default=str))
        return Response(body, status=200 if results.report is not None else 202)


class ExportView(APIView):
    """One CSV export of analysis.exports, streamed as the dashboard's download and the
    export_* commands stream it. Errors stay JSON whatever the client accepts."""

    export = ""  # key of analysis.exports.EXPORTS
    takes_filters = True

    def perform_content_negotiation(self, request, force=False):
        renderer = JSONRenderer()
        return renderer, renderer.media_type

    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        study = get_object_or_404(Study, slug=slug)
        filters = options = None
        if self.takes_filters:
            form = analysis_form(request, study)
            filters, options = form.filters(), form.options()
        try:
            return exports.export_download(self.export, study, filters=filters, options=options)
        except stored_reports.ReportNotReady:
            return Response(
                {"detail": "The study's first metrics for these filters are being computed: try again in a minute."},
                status=503,
                headers={"Retry-After": "30"},
            )


def _export_schema(export: str, *, filters: bool):
    return extend_schema(
        operation_id=f"studies_export_{export}_csv",
        summary=f"Export the {export} as CSV",
        description=f"analysis.exports' {export} CSV, streamed (as the dashboard's download and `export_{export}`).",
        parameters=ANALYSIS_FILTERS if filters else None,
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )


class VotesExportView(ExportView):
    export = "votes"
    model_permissions = {"GET": exports.EXPORT_PERMISSIONS["votes"]}
    takes_filters = False  # every vote with its provenance, as the command and the dashboard give it

    @_export_schema("votes", filters=False)
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        return super().get(request, slug)


class ItemsExportView(ExportView):
    export = "items"
    model_permissions = {"GET": exports.EXPORT_PERMISSIONS["items"]}

    @_export_schema("items", filters=True)
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        return super().get(request, slug)


class MetricsExportView(ExportView):
    export = "metrics"
    model_permissions = {"GET": exports.EXPORT_PERMISSIONS["metrics"]}

    @_export_schema("metrics", filters=True)
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        return super().get(request, slug)


# --------------------------------------------------------------------------- perturbations


VARIANTS = ANSWERS.filter(derived_from__isnull=False).annotate(
    item_id=Subquery(ComparisonItem.objects.filter(answer_a2=OuterRef("pk")).values("pk")[:1])
)


@_with_filters(inputs.VariantFilter)
class StudyPerturbationsView(StudyListView):
    """The study's variants (perturbed answers) with their checks and review status."""

    queryset = VARIANTS
    # As the admin's generate and review pages (perturbations.admin).
    model_permissions = {"GET": (Variant.VIEW_PERMISSION,), "POST": (Variant.REVIEW_PERMISSION,)}
    study_lookup = "question__study"
    serializer_class = serializers.VariantSerializer
    filter_class = inputs.VariantFilter

    @extend_schema(
        summary="Generate variants",
        description=(
            "One pending variant of `kind` per question (perturbations.services.perturbation_generate, as "
            "the admin's generate form and `perturb`). `rule`: done in the request, 201 with what was made "
            "(200 when every variant already existed). `model`: queued for the task worker, as the admin "
            "does, 202; the variants then appear in this list as pending."
        ),
        request=inputs.PerturbationGenerateInput,
        responses={
            200: serializers.GenerateResultSerializer,
            201: serializers.GenerateResultSerializer,
            202: serializers.GenerateQueuedSerializer,
            400: SERVICE_ERROR,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        data = inputs.PerturbationGenerateInput(data=request.data, context={"study": study})
        data.is_valid(raise_exception=True)
        args = data.validated_data
        if args["method"] == "model":
            # A model rewrites one answer at a time: queued, as the admin queues it.
            perturbation_generate_queue(
                study=study,
                kind=args["kind"].slug,
                seed=args["seed"],
                of=args["of"],
                user=request.user,
                generator=args.get("generator"),
                constrain_format=args["constrain_format"],
            )
            detail = f"Queued model-based {args['kind'].slug} variants of {study.slug}; they appear here as pending."
            return Response({"queued": True, "detail": detail}, status=status.HTTP_202_ACCEPTED)
        try:
            result = perturbation_generate(study=study, **args, user=request.user)
        except PerturbationError as exc:
            return service_error(exc)
        # Read back with the columns the list shows.
        result.created = list(VARIANTS.filter(pk__in=[a.pk for a in result.created]).order_by("id"))
        created = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        return Response(serializers.GenerateResultSerializer(result).data, status=created)


class AnswerReviewView(APIView):
    model_permissions = {"POST": (Variant.REVIEW_PERMISSION,)}

    @extend_schema(
        summary="Approve or reject a variant",
        description=(
            "perturbations.services.answer_review, as the admin's review page: approving puts the variant "
            "into its question's comparison item for the kind; rejecting takes it out. Refused (400) for "
            "original answers and when it would change an item that already has votes."
        ),
        request=inputs.ReviewInput,
        responses={200: serializers.ReviewResultSerializer, 400: SERVICE_ERROR},
    )
    def post(self, request: Request, pk: int) -> Response:
        answer = _by_id(Answer, pk)
        data = inputs.ReviewInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            item = answer_review(answer=answer, user=request.user, **data.validated_data)
        except PerturbationError as exc:
            return service_error(exc)
        body = {"answer": VARIANTS.get(pk=pk), "item": item.pk if item else None}
        return Response(serializers.ReviewResultSerializer(body).data)
