from django.contrib import admin
from django.urls import include, path

from biasstudy.health import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health/", health, name="health"),
    path("api/", include("api.urls")),
    path("dashboard/", include("analysis.urls")),
    path("", include("annotations.urls")),
]
