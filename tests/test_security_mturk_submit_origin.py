"""MTurk's `turkSubmitTo` ends up in the done page's form action and its Content-Security-Policy's
`form-action`: only an origin, parsed and rebuilt, gets there. A value that smuggles CSP sources
or directives behind a loopback host is refused when the worker enters (they get in as usual,
nothing of it is stored), and a value stored before that check is refused again on the done page."""

from urllib.parse import quote

import pytest

from annotations.models import Rater
from tests.factories import make_question, make_study
from tests.test_rater_notices import MTURK, form_action
from tests.test_rater_views import token_in, urls

pytestmark = pytest.mark.django_db

HOSTILE = [
    "http://localhost:1 'unsafe-inline' https://evil.example; sandbox",
    "http://localhost:1;script-src *",
    "http://127.0.0.1:8123/'unsafe-eval'",
    "http://localhost/evil",
    'http://localhost:1"',
    "http://localhost:99999",
    "http://user:pw@localhost:1",
    "http://localhost:1\thttps:",
]


def done_page(client, study):
    token = token_in(client.get(urls(study)["task"]))
    client.post(urls(study)["task"], {"token": token, "choice": "first"})
    return client.get(urls(study)["done"])


def a_study():
    study = make_study(completion_code="C0DE-42", target_per_rater=1)
    make_question(study)
    return study


@pytest.mark.parametrize("submit_to", HOSTILE)
def test_a_turk_submit_to_carrying_more_than_an_origin_is_refused_and_the_worker_gets_in_as_usual(
    anon_client, submit_to
):
    study = a_study()
    entered = anon_client.post(urls(study)["landing"] + MTURK + quote(submit_to, safe=""), {"consent": "on"})
    assert entered.status_code == 302 and entered["Location"] == urls(study)["task"]
    assert "turkSubmitTo" not in Rater.objects.get().source_meta

    response = done_page(anon_client, study)
    html = response.content.decode()
    assert "C0DE-42" in html and "externalSubmit" not in html
    assert form_action(response) == form_action(anon_client.get(urls(study)["landing"]))
    assert "evil" not in response["Content-Security-Policy"] and "unsafe" not in form_action(response)


@pytest.mark.parametrize("submit_to", HOSTILE)
def test_a_hostile_endpoint_stored_before_the_check_is_not_posted_to_nor_allowed(anon_client, submit_to):
    study = a_study()
    assert anon_client.post(urls(study)["landing"] + MTURK, {"consent": "on"}).status_code == 302
    rater = Rater.objects.get()
    Rater.objects.filter(pk=rater.pk).update(source_meta={**rater.source_meta, "turkSubmitTo": submit_to})

    response = done_page(anon_client, study)
    assert "externalSubmit" not in response.content.decode()
    assert form_action(response) == form_action(anon_client.get(urls(study)["landing"]))


@pytest.mark.parametrize(
    ("submit_to", "origin"),
    [
        ("http://LOCALHOST:8123/", "http://localhost:8123"),
        ("http://[::1]:8123", "http://[::1]:8123"),
        ("https://www.mturk.com/", "https://www.mturk.com"),
    ],
)
def test_the_done_page_posts_to_and_allows_the_parsed_origin_only(anon_client, submit_to, origin):
    study = a_study()
    assert (
        anon_client.post(urls(study)["landing"] + MTURK + quote(submit_to, safe=""), {"consent": "on"}).status_code
        == 302
    )
    assert Rater.objects.get().source_meta["turkSubmitTo"] == origin

    response = done_page(anon_client, study)
    assert f'action="{origin}/mturk/externalSubmit"' in response.content.decode()
    usual = form_action(anon_client.get(urls(study)["landing"]))
    assert set(form_action(response)) == {*usual, origin}


@pytest.mark.parametrize("value", HOSTILE)
def test_the_parser_refuses_what_is_not_an_origin(value):
    from django.core.exceptions import ValidationError

    from annotations.forms import turk_submit_origin  # here: the module's other tests run without it

    with pytest.raises(ValidationError):
        turk_submit_origin(value)
