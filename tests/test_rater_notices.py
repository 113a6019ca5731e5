"""What the rater pages tell a rater over HTTP: a vote from a stale tab, a participant id we do
not accept, a vote that came too fast, how to re-read the instructions and take a break, the
completion code, and an MTurk assignment handed back to the endpoint it came from."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import Lease, Rater, Vote
from tests.factories import make_question, make_rater, make_study
from tests.test_rater_views import HX, signed_in, token_in, urls

pytestmark = pytest.mark.django_db


# --- the participant id ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "named"),
    [
        ("has space", "These characters are not accepted: space."),
        ("müller#1", "These characters are not accepted: “ü”, “#”."),
        ("a\u200bb", "These characters are not accepted: zero width space."),
        ("tab\there", "These characters are not accepted: tab."),
        ("   ", "Your participant id is only spaces"),
    ],
)
def test_an_id_with_characters_we_do_not_accept_is_told_which(anon_client, typed, named):
    study = make_study()
    response = anon_client.post(urls(study)["landing"], {"participant_id": typed, "consent": "on"})
    html = response.content.decode()
    assert response.status_code == 400
    assert named in html
    assert "This field is required" not in html
    assert not Rater.objects.exists()


def test_an_empty_form_says_what_to_do_for_each_field(anon_client):
    study = make_study()
    html = anon_client.post(urls(study)["landing"], {"participant_id": ""}).content.decode()
    assert "Please type your participant id." in html and "Please tick this box to take part." in html


def test_spaces_around_an_id_are_dropped_not_refused(anon_client):
    study = make_study()
    make_question(study)
    response = anon_client.post(urls(study)["landing"], {"participant_id": "  P-17  ", "consent": "on"})
    assert response.status_code == 302
    assert Rater.objects.get().participant_id == "P-17"


def test_errors_are_tied_to_their_fields_by_ids_that_exist(anon_client):
    study = make_study()
    html = anon_client.post(urls(study)["landing"], {"participant_id": "a b"}).content.decode()
    assert 'aria-describedby="id_participant_id_helptext id_participant_id_error"' in html
    assert 'id="id_participant_id_helptext"' in html and 'id="id_participant_id_error"' in html
    assert 'aria-describedby="id_consent_error"' in html and 'id="id_consent_error"' in html
    assert html.count('aria-invalid="true"') == 2


def test_a_platform_link_with_a_bad_id_says_why_the_rater_must_type_one(anon_client):
    study = make_study()
    html = anon_client.get(urls(study)["landing"] + "?PROLIFIC_PID=abc%20def&STUDY_ID=s").content.decode()
    assert "The participant id in your study link was not accepted" in html
    assert "These characters are not accepted: space." in html
    assert 'name="participant_id"' in html


# --- votes the rater should hear about ---------------------------------------------------


def two_tabs(rater: Rater) -> tuple[Client, str]:
    """A rater whose second tab still shows the item they already answered in the first."""
    client = signed_in(rater)
    token = token_in(client.get(urls(rater.study)["task"]))
    assert client.post(urls(rater.study)["task"], {"token": token, "choice": "first"}, **HX).status_code == 200
    return client, token


def test_a_vote_from_a_stale_tab_says_what_happened_and_shows_the_current_item(rater):
    client, stale = two_tabs(rater)
    current = Rater.objects.get(pk=rater.pk).leases.get(voted_at__isnull=True).token
    response = client.post(urls(rater.study)["task"], {"token": stale, "choice": "second"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "That item had already been answered, perhaps in another tab or window" in html
    assert token_in(response) == current
    assert list(Vote.objects.values_list("choice_shown", flat=True)) == ["first"], "the first answer stands"


def test_without_javascript_the_stale_tab_notice_survives_the_redirect(rater):
    client, stale = two_tabs(rater)
    response = client.post(urls(rater.study)["task"], {"token": stale, "choice": "second"})
    assert response.status_code == 302 and response["Location"] == urls(rater.study)["task"] + "?notice=stale"
    assert "perhaps in another tab or window" in client.get(response["Location"]).content.decode()


def test_an_unknown_notice_in_the_address_shows_nothing(rater):
    html = signed_in(rater).get(urls(rater.study)["task"] + "?notice=<b>hi</b>").content.decode()
    assert "data-notice" not in html and "<b>hi" not in html


def test_a_plain_vote_is_announced_as_recorded_with_the_progress(rater):
    client = signed_in(rater)
    token = token_in(client.get(urls(rater.study)["task"]))
    html = client.post(urls(rater.study)["task"], {"token": token, "choice": "tie"}, **HX).content.decode()
    assert 'data-announce="Vote recorded. 1 of 3 done."' in html
    assert "data-notice" not in html


@pytest.mark.parametrize("fast_notice", [True, False])
def test_a_too_fast_vote_gets_a_gentle_notice_only_where_the_study_asks_for_it(fast_notice):
    study = make_study(min_response_ms=5000, fast_notice=fast_notice, target_per_rater=3)
    for _ in range(3):
        make_question(study)
    client = signed_in(make_rater(study))
    token = token_in(client.get(urls(study)["task"]))
    html = client.post(urls(study)["task"], {"token": token, "choice": "first", "client_ms": 400}, **HX).content
    assert ("That was fast!" in html.decode()) is fast_notice
    assert Vote.objects.get().meta["assignment"]["too_fast"] is True


def test_a_vote_above_the_minimum_time_gets_no_fast_notice():
    study = make_study(min_response_ms=5000, fast_notice=True)
    make_question(study)
    make_question(study)
    client = signed_in(make_rater(study))
    token = token_in(client.get(urls(study)["task"]))
    # Handed out 6 s ago, as the browser says: a vote's time is at most the server's.
    Lease.objects.filter(token=token).update(created_at=timezone.now() - timedelta(seconds=6))
    html = client.post(urls(study)["task"], {"token": token, "choice": "first", "client_ms": 6000}, **HX).content
    assert "That was fast!" not in html.decode()
    assert Vote.objects.get().meta["assignment"]["too_fast"] is False


# --- what the task and done pages offer ----------------------------------------------------


def test_the_task_page_keeps_the_instructions_and_says_how_to_resume(rater):
    rater.study.instructions = "Pick the **better** answer."
    rater.study.save()
    html = signed_in(rater).get(urls(rater.study)["task"]).content.decode()
    assert "<summary>Instructions</summary>" in html and "<strong>better</strong>" in html
    assert "<summary>Take a break</summary>" in html
    assert f"enter your participant id <strong>{rater.participant_id}</strong> again" in html
    assert "http://testserver" + urls(rater.study)["landing"] in html


def test_the_instructions_name_the_buttons_as_they_are_labelled(rater):
    html = signed_in(rater).get(urls(rater.study)["task"]).content.decode()
    for label in ("Answer 1 is better", "About the same", "Answer 2 is better"):
        assert html.count(label) == 2, f"{label!r}: once on its button, once in the keyboard help"
    with open("fixtures/demo_study.json", encoding="utf-8") as demo:
        text = demo.read()
    assert "**About the same**" in text and "**Tie**" not in text


def finished(study, **rater_kw) -> Client:
    rater = make_rater(study, **rater_kw)
    client = Client()
    client.cookies.update(signed_in(rater).cookies)
    token = token_in(client.get(urls(study)["task"]))
    client.post(urls(study)["task"], {"token": token, "choice": "first"})
    return client


def test_the_completion_code_has_a_copy_button():
    study = make_study(completion_code="C0DE-42", target_per_rater=1)
    make_question(study)
    html = finished(study).get(urls(study)["done"]).content.decode()
    assert '<output id="completion-code" aria-labelledby="code-label">C0DE-42</output>' in html
    assert 'data-copy="completion-code"' in html and "Copy code" in html


# --- MTurk ---------------------------------------------------------------------------------

MTURK = "?workerId=W1&assignmentId=A9&hitId=H3&turkSubmitTo="


def mturk_done(anon_client, submit_to: str):
    study = make_study(completion_code="C0DE-42", target_per_rater=1)
    make_question(study)
    landing = urls(study)["landing"] + MTURK + submit_to
    assert anon_client.post(landing, {"consent": "on"}).status_code == 302
    token = token_in(anon_client.get(urls(study)["task"]))
    anon_client.post(urls(study)["task"], {"token": token, "choice": "first"})
    return anon_client.get(urls(study)["done"])


@pytest.mark.parametrize(
    "submit_to", ["https://workersandbox.mturk.com", "https://www.mturk.com/", "http://127.0.0.1:8123"]
)
def test_an_mturk_worker_hands_the_assignment_back_to_where_the_hit_came_from(anon_client, submit_to):
    response = mturk_done(anon_client, submit_to)
    html = response.content.decode()
    action = submit_to.rstrip("/") + "/mturk/externalSubmit"
    assert f'<form method="post" action="{action}" class="mturk-submit" data-auto-submit>' in html
    assert '<input type="hidden" name="assignmentId" value="A9">' in html
    assert "csrfmiddlewaretoken" not in html, "our CSRF token never goes to another site"
    origin = submit_to.rstrip("/")
    usual = form_action(anon_client.get(urls(Rater.objects.get().study)["landing"]))
    assert set(form_action(response)) == {*usual, origin}, "the page may post there, and only there besides the usual"


def form_action(response) -> list[str]:
    policy = dict(d.strip().split(" ", 1) for d in response["Content-Security-Policy"].split(";") if d.strip())
    return policy["form-action"].split()


@pytest.mark.parametrize(
    "submit_to",
    [
        "https://evil.example",
        "http://www.mturk.com",  # not https
        "https://www.mturk.com.evil.example",
        "https://user@www.mturk.com",
        "https://www.mturk.com:8443",
        "javascript:alert(1)",
        "https://www.mturk.com/?next=https://evil.example",
    ],
)
def test_an_mturk_endpoint_elsewhere_is_ignored_and_the_code_shown_instead(anon_client, submit_to):
    html = mturk_done(anon_client, submit_to).content.decode()
    assert "mturk-submit" not in html and "externalSubmit" not in html
    assert "C0DE-42" in html
    assert "turkSubmitTo" not in Rater.objects.get().source_meta
