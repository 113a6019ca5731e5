"""/api/v1/... : the REST API (docs/API.md). /api/schema/ and /api/docs/: its OpenAPI schema and
documentation page, for staff."""

from django.contrib.admin.views.decorators import staff_member_required
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from api import views

app_name = "api"

v1 = [
    path("studies/", views.StudiesView.as_view(), name="studies"),
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
    path("votes/<int:pk>/", views.VoteDetailView.as_view(), name="vote-detail"),
    # To come with the judges, perturbations and analysis apps: runs/, runs/<id>/,
    # studies/<slug>/metrics/, studies/<slug>/perturbations/, answers/<id>/review/.
]

urlpatterns = [
    path("v1/", include(v1)),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # A page for people: staff who are not logged in are sent to the admin's login page. The
    # split view serves its start-up script as a file, which our CSP (no inline script) allows.
    path("docs/", staff_member_required(SpectacularSwaggerSplitView.as_view(url_name="api:schema")), name="docs"),
    # Anything else under /api/ ending in a slash: a JSON 404, not the site's HTML page. (Paths
    # without the slash stay unmatched, so Django's APPEND_SLASH redirect still helps.)
    re_path(r"^[\s\S]*/$", views.not_found),
]
