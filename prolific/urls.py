from django.urls import path

from prolific import views

app_name = "prolific"

urlpatterns = [
    path("study/<int:pk>/", views.prolific_page, name="study"),
]
