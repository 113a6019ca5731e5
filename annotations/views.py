from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotations.models import Study


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    studies = Study.objects.filter(status=Study.Status.COLLECTING).order_by("title")
    return render(request, "annotations/home.html", {"studies": studies})
