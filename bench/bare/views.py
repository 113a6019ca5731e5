"""The baseline the rater flow is measured against: a page rendered from a template and a POST
that inserts one row, on the same stack (gunicorn, middleware, database), nothing else."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from bench.bare.models import BareRow


@require_GET
def page(request: HttpRequest) -> HttpResponse:
    return render(request, "bare/page.html", {"n": 1})


@require_POST
def insert(request: HttpRequest) -> HttpResponse:
    BareRow.objects.create(value=request.POST.get("value", "x")[:16])
    return HttpResponse("ok")
