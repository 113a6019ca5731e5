from django.urls import path

from analysis import views

app_name = "analysis"

urlpatterns = [
    path("", views.study_list, name="studies"),
    path("<slug:slug>/", views.study_dashboard, name="study"),
    path("<slug:slug>/raters/", views.rater_monitor, name="raters"),
    path("<slug:slug>/power/", views.power, name="power"),
    path("<slug:slug>/export/<str:name>.csv", views.export_csv, name="export"),
    path("<slug:slug>/payment.csv", views.payment_csv, name="payment"),
    path("<slug:slug>/plot/<str:name>.<str:fmt>", views.plot, name="plot"),
]
