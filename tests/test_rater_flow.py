"""The rater's path through the pages with Django's test client: enter, vote, resume, finish."""

import re

import pytest
from django.urls import reverse

from annotations.models import Vote
from tests.factories import make_question, make_study

pytestmark = pytest.mark.django_db


def token_of(response) -> str:
    return re.search(r'name="token" value="([^"]+)"', response.content.decode()).group(1)


def enter(client, study, pid="P1", **extra):
    data = {"participant_id": pid, "consent": "on", **extra}
    return client.post(reverse("annotations:landing", args=[study.slug]), data)


def test_a_rater_enters_votes_and_gets_the_completion_code(client):
    study = make_study(votes_per_item=2, target_per_rater=2, completion_code="THANKS-42")
    for _ in range(3):
        make_question(study)
    response = enter(client, study)
    assert response.status_code == 302
    task_url = reverse("annotations:task", args=[study.slug])
    page = client.get(task_url)
    assert b"0 / 2" in page.content
    response = client.post(task_url, {"token": token_of(page), "choice": "first"})
    assert response.status_code == 302
    page = client.get(task_url)
    assert b"1 / 2" in page.content
    response = client.post(task_url, {"token": token_of(page), "choice": "tie"})
    done = client.get(task_url, follow=True)
    assert done.redirect_chain[-1][0] == reverse("annotations:done", args=[study.slug])
    assert b"THANKS-42" in done.content
    assert Vote.objects.filter(rater__participant_id="P1").count() == 2
