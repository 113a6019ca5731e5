from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("dashboard/", include("analysis.urls")),
    path("", include("annotations.urls")),
]
