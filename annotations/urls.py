from django.urls import path

from annotations import views

app_name = "annotations"

urlpatterns = [
    path("", views.home, name="home"),
    path("s/<slug:slug>/", views.study_landing, name="landing"),
    path("s/<slug:slug>/task/", views.study_task, name="task"),
    path("s/<slug:slug>/done/", views.study_done, name="done"),
]
