from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from biasstudy.health import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health/", health, name="health"),
    # Browsers ask for /favicon.ico on pages that name no icon (JSON, the API docs).
    path("favicon.ico", RedirectView.as_view(url=static("biasstudy/favicon.svg"), permanent=True)),
    path("api/", include("api.urls")),
    path("dashboard/", include("analysis.urls")),
    path("", include("annotations.urls")),
]
