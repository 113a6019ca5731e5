from django.urls import path

from vote_imports import admin

app_name = "vote_imports"

# Under /dashboard/votes/import/ (biasstudy/urls.py), where the admin's "Import votes" action and
# the docs have always sent researchers.
urlpatterns = [
    path("", admin.votes_import, name="votes-import"),
    path("<str:token>/", admin.votes_import_progress, name="votes-import-progress"),
]
