"""Big studies stay fast in the admin: every list and every object's page runs the same number
of queries whatever the study's size (no query per row, no count over questions x items x
raters), below a pinned bound. Measured on a study, then on the same study four times larger
with more studies beside it."""

from __future__ import annotations

import re
import secrets
from datetime import timedelta

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotations.models import Judge, Lease, Vote
from judges.models import CachedResponse, JudgeRun
from tests.factories import human_pool, make_llm_judge, make_question, make_rater, make_study, make_variant

# The most queries any admin list or object page may run (session, user, the page's own).
MAX_QUERIES = 20


def _grow(study, llm: Judge, run: JudgeRun, n: int) -> None:
    """Add n questions (each with a variant), n raters with a vote and a lease each, n judge
    votes and n cached responses; and another study (lists get a row more)."""
    make_question(make_study())
    humans = human_pool(study)
    for _ in range(n):
        question = make_question(study)
        make_variant(question)
        item = study.items.filter(question=question).first()
        rater = make_rater(study)
        Vote.objects.create(item=item, judge=humans, rater=rater, shown_first="a1", choice_shown="first", choice="a1")
        Vote.objects.create(item=item, judge=llm, run_id=run.pk, shown_first="a2", choice_shown="first", choice="a2")
        Lease.objects.create(
            study=study, rater=rater, item=item, question=question, token=secrets.token_urlsafe(32),
            shown_first="a1", expires_at=timezone.now() + timedelta(minutes=5), voted_at=timezone.now(),
        )  # fmt: skip
        CachedResponse.objects.create(key=secrets.token_hex(32), backend="openai_compatible", model="m", text="A")


def _pages(client) -> dict[str, str]:
    """Every registered model's list and its first object's page."""
    urls = {}
    for model, model_admin in admin.site._registry.items():
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        urls[f"{model.__name__} list"] = reverse(f"{prefix}_changelist")
        request = client.get(urls[f"{model.__name__} list"]).wsgi_request
        first = model_admin.get_queryset(request).order_by("pk").first()
        if first is not None:
            urls[f"{model.__name__} #{first.pk}"] = reverse(f"{prefix}_change", args=[first.pk])
    return urls


def _counts(client, urls: dict[str, str], sizes: dict[str, int] | None = None) -> dict[str, int]:
    """Queries per page; `sizes` collects each page's length in bytes."""
    counts = {}
    for name, url in urls.items():
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, f"{name}: {response.status_code}"
        counts[name] = len(queries)
        if sizes is not None:
            sizes[name] = len(response.content)
    return counts


@pytest.mark.django_db
def test_every_admin_page_runs_as_many_queries_for_a_large_study_as_for_a_small_one(staff_client):
    study = make_study(slug="grows")
    llm = make_llm_judge(name="grows-judge").judge
    run = JudgeRun.objects.create(study=study, judge=llm, status=JudgeRun.Status.DONE, total=0)
    _grow(study, llm, run, 3)
    urls = _pages(staff_client)
    _counts(staff_client, urls)  # warm the caches of content types and the like
    small_sizes, large_sizes = {}, {}
    small = _counts(staff_client, urls, small_sizes)
    _grow(study, llm, run, 9)
    large = _counts(staff_client, urls, large_sizes)
    grew = {name: (small[name], large[name]) for name in urls if large[name] != small[name]}
    assert not grew, f"queries per page grew with the study (small, large): {grew}"
    over = {name: count for name, count in large.items() if count > MAX_QUERIES}
    assert not over, f"pages over {MAX_QUERIES} queries: {over}"
    # An object's page does not list the study's other objects (a select of every answer in
    # the database took 11 s to render for a chen2024 question): it stays the same size.
    swelled = {
        name: (small_sizes[name], large_sizes[name])
        for name in urls
        if "#" in name and large_sizes[name] > small_sizes[name] + 300
    }
    assert not swelled, f"object pages grew with the study (bytes, small and large): {swelled}"


# A study's many-sided tables: joining two of them makes one row per pair.
_MANY = ("annotations_question", "annotations_comparisonitem", "annotations_rater", "annotations_vote")
_JOINED = re.compile(r'JOIN "?(\w+)"?')


@pytest.mark.django_db
def test_the_study_list_and_page_never_join_two_of_a_study_s_many_sided_tables(staff_client):
    study = make_study(slug="product")
    llm = make_llm_judge(name="product-judge").judge
    run = JudgeRun.objects.create(study=study, judge=llm, status=JudgeRun.Status.DONE, total=0)
    _grow(study, llm, run, 2)
    for url in (
        reverse("admin:annotations_study_changelist"),
        reverse("admin:annotations_study_change", args=[study.pk]),
    ):
        with CaptureQueriesContext(connection) as queries:
            page = staff_client.get(url)
        assert page.status_code == 200
        for query in queries.captured_queries:
            joined = {table for table in _JOINED.findall(query["sql"]) if table in _MANY}
            assert len(joined) <= 1, f"{url} joins {sorted(joined)}: {query['sql']}"
        if url.endswith("/study/"):
            row = page.content.decode()
            # The counts are right: 2 questions, 4 items, 2 raters, 4 votes (2 human, 2 judge).
            assert re.search(r'field-question_count">2<', row) and re.search(r'field-vote_count">4<', row), row[-3000:]
