from django.urls import include, path

from bench.bare import views

urlpatterns = [
    path("bare/page/", views.page),
    path("bare/insert/", views.insert),
    path("", include("biasstudy.urls")),
]
