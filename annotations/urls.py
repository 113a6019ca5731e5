from django.urls import path

from annotations import views

app_name = "annotations"

urlpatterns = [
    path("", views.home, name="home"),
]
