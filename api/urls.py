"""/api/v1/... : the REST API (docs/API.md). /api/schema/ and /api/docs/: its OpenAPI schema and
documentation page, for staff."""

from django.contrib.admin.views.decorators import staff_member_required
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from api import views

app_name = "api"

v1 = [
    path("studies/", views.StudiesView.as_view(), name="studies"),
    path("study-imports/<str:token>/", views.StudyImportView.as_view(), name="study-import"),
    path("studies/<slug:slug>/", views.StudyDetailView.as_view(), name="study-detail"),
    path("studies/<slug:slug>/export/", views.StudyExportView.as_view(), name="study-export"),
    path("studies/<slug:slug>/questions/", views.StudyQuestionsView.as_view(), name="study-questions"),
    path("studies/<slug:slug>/answers/", views.StudyAnswersView.as_view(), name="study-answers"),
    path("studies/<slug:slug>/items/", views.StudyItemsView.as_view(), name="study-items"),
    path("studies/<slug:slug>/raters/", views.StudyRatersView.as_view(), name="study-raters"),
    path("questions/<int:pk>/", views.QuestionDetailView.as_view(), name="question-detail"),
    path("answers/<int:pk>/", views.AnswerDetailView.as_view(), name="answer-detail"),
    path("items/<int:pk>/", views.ItemDetailView.as_view(), name="item-detail"),
    path("raters/<int:pk>/", views.RaterDetailView.as_view(), name="rater-detail"),
    path("judges/", views.JudgesView.as_view(), name="judges"),
    path("judges/<int:pk>/", views.JudgeDetailView.as_view(), name="judge-detail"),
    path("votes/", views.VotesView.as_view(), name="votes"),
    path("votes/import/", views.VotesImportView.as_view(), name="votes-import"),
    path("votes/import/<str:token>/", views.VotesImportJobView.as_view(), name="votes-import-job"),
    path("votes/<int:pk>/", views.VoteDetailView.as_view(), name="vote-detail"),
    path("llm-judges/", views.LLMJudgesView.as_view(), name="llm-judges"),
    path("llm-judges/<int:pk>/", views.LLMJudgeDetailView.as_view(), name="llm-judge-detail"),
    path("runs/", views.RunsView.as_view(), name="runs"),
    path("runs/<int:pk>/", views.RunDetailView.as_view(), name="run-detail"),
    path("runs/<int:pk>/cancel/", views.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<int:pk>/resume/", views.RunResumeView.as_view(), name="run-resume"),
    path("studies/<slug:slug>/metrics/", views.StudyMetricsView.as_view(), name="study-metrics"),
    path("studies/<slug:slug>/export/votes.csv", views.VotesExportView.as_view(), name="study-export-votes"),
    path("studies/<slug:slug>/export/items.csv", views.ItemsExportView.as_view(), name="study-export-items"),
    path("studies/<slug:slug>/export/metrics.csv", views.MetricsExportView.as_view(), name="study-export-metrics"),
    path("studies/<slug:slug>/perturbations/", views.StudyPerturbationsView.as_view(), name="study-perturbations"),
    path("answers/<int:pk>/review/", views.AnswerReviewView.as_view(), name="answer-review"),
]
v1.insert(0, path("", views.ApiRootView.as_view(patterns=tuple(v1)), name="root"))

urlpatterns = [
    path("v1/", include(v1)),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # A page for people: staff who are not logged in are sent to the admin's login page. The
    # split view serves its start-up script as a file, which our CSP (no inline script) allows.
    path("docs/", staff_member_required(SpectacularSwaggerSplitView.as_view(url_name="api:schema")), name="docs"),
    # Anything else under /api/: a JSON 404, not the site's HTML page (views.not_found sends a
    # GET of an endpoint without its final slash on to it).
    re_path(r"^[\s\S]*$", views.not_found),
]
