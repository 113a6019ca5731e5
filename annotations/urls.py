from django.urls import path

from annotations import pages, views

app_name = "annotations"

urlpatterns = [
    path("", pages.home, name="home"),
    path("s/<slug:slug>/", pages.study_landing, name="landing"),
    path("s/<slug:slug>/task/", views.study_task, name="task"),
    path("s/<slug:slug>/done/", pages.study_done, name="done"),
]
