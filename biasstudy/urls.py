from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView

from biasstudy.health import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health/", health, name="health"),
    # Browsers ask for /favicon.ico on pages that name no icon (JSON, the API docs).
    # The icon's URL is looked up per request: outside DEBUG it is the hashed name from the
    # collectstatic manifest, which does not exist yet when `migrate` or `check` load the URLs.
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("biasstudy/favicon.svg"), permanent=True)),
    path("api/", include("api.urls")),
    path("dashboard/votes/import/", include("vote_imports.urls")),
    path("dashboard/", include("analysis.urls")),
    path("prolific/", include("prolific.urls")),
    path("", include("annotations.urls")),
]
