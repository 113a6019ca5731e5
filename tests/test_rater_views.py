"""The rater pages over HTTP with personas: anonymous visitor, rater, another rater, staff."""

import re
import time
from unittest import mock

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from annotations import pages
from annotations.assignment import lease_next
from annotations.models import Lease, Rater, Slot, Study, Vote
from tests.factories import make_question, make_rater, make_study

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def urls(study):
    return {name: reverse(f"annotations:{name}", args=[study.slug]) for name in ("landing", "task", "done")}


def signed_in(rater: Rater) -> Client:
    """A browser session of this rater, entered through the landing page like a real one."""
    client = Client()
    response = client.post(urls(rater.study)["landing"], {"participant_id": rater.participant_id, "consent": "on"})
    assert response.status_code == 302, response.content
    return client


def token_in(response) -> str:
    return re.search(r'name="token" value="([^"]+)"', response.content.decode()).group(1)


# --- landing -------------------------------------------------------------------------------


def test_the_landing_page_renders_instructions_and_consent_sanitised(anon_client):
    study = make_study(
        instructions="# Read *carefully*\n<script>alert(1)</script>", consent="You agree [x](javascript:alert(1))."
    )
    response = anon_client.get(urls(study)["landing"])
    html = response.content.decode()
    assert response.status_code == 200
    assert "<em>carefully</em>" in html
    assert "<script>alert" not in html and "javascript:" not in html
    assert 'name="participant_id"' in html


def test_entering_needs_an_id_and_consent(anon_client):
    study = make_study()
    response = anon_client.post(urls(study)["landing"], {"participant_id": "has space"})
    assert response.status_code == 400
    assert not Rater.objects.exists()
    assert "These characters are not accepted: space." in response.content.decode()


def test_a_prolific_link_skips_the_id_entry_and_keeps_the_platform_ids(anon_client):
    study = make_study()
    query = "?PROLIFIC_PID=abc123&STUDY_ID=s1&SESSION_ID=x9"
    page = anon_client.get(urls(study)["landing"] + query)
    assert b'name="participant_id"' not in page.content
    assert b"abc123" in page.content
    response = anon_client.post(urls(study)["landing"] + query, {"consent": "on"})
    assert response.status_code == 302
    rater = Rater.objects.get()
    assert (rater.participant_id, rater.source, rater.target) == ("abc123", "prolific", study.target_per_rater)
    assert rater.source_meta == {"STUDY_ID": "s1", "SESSION_ID": "x9"}


def test_an_mturk_link_enters_and_a_preview_cannot_start(anon_client):
    study = make_study()
    preview = "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1"
    page = anon_client.get(urls(study)["landing"] + preview)
    assert b"Accept the HIT" in page.content and b"<form" not in page.content
    anon_client.post(urls(study)["landing"] + preview, {"participant_id": "W1", "consent": "on"})
    assert not Rater.objects.exists()
    query = "?workerId=W1&assignmentId=A1&hitId=h1"
    anon_client.post(urls(study)["landing"] + query, {"consent": "on"})
    assert Rater.objects.get().source == "mturk"


def test_coming_back_with_the_same_id_resumes_the_same_pending_item(rater):
    first = signed_in(rater).get(urls(rater.study)["task"])
    second = signed_in(rater).get(urls(rater.study)["task"])
    assert token_in(first) == token_in(second)
    assert Rater.objects.count() == 1 and Lease.objects.count() == 1


def test_a_rater_who_entered_goes_straight_to_the_task(rater):
    client = signed_in(rater)
    response = client.get(urls(rater.study)["landing"])
    assert response.status_code == 302 and response["Location"] == urls(rater.study)["task"]


def test_a_draft_study_is_hidden_from_raters_but_staff_can_preview_it(anon_client, staff_client):
    study = make_study(status=Study.Status.DRAFT)
    assert anon_client.get(urls(study)["landing"]).status_code == 404
    assert staff_client.get(urls(study)["landing"]).status_code == 200


# --- task: access control ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["task", "done"])
def test_an_anonymous_visitor_is_sent_to_the_landing_page(anon_client, small_study, name):
    response = anon_client.get(urls(small_study)[name])
    assert response.status_code == 302 and response["Location"] == urls(small_study)["landing"]
    htmx = anon_client.post(urls(small_study)["task"], {"token": "x", "choice": "first"}, **HX)
    assert htmx["HX-Redirect"] == urls(small_study)["landing"]
    assert not Vote.objects.exists()


def test_staff_who_did_not_enter_as_a_rater_cannot_vote(staff_client, small_study):
    response = staff_client.get(urls(small_study)["task"])
    assert response.status_code == 302 and response["Location"] == urls(small_study)["landing"]


def test_it_rejects_a_vote_on_another_raters_current_item(rater):
    owner = signed_in(rater)
    token = token_in(owner.get(urls(rater.study)["task"]))
    intruder = signed_in(make_rater(rater.study))
    response = intruder.post(urls(rater.study)["task"], {"token": token, "choice": "first"})
    assert response.status_code == 302 and response["Location"] == urls(rater.study)["task"] + "?notice=not_yours"
    htmx = intruder.post(urls(rater.study)["task"], {"token": token, "choice": "first"}, **HX)
    assert htmx.status_code == 200 and "is not one of yours any more" in htmx.content.decode()
    assert token not in htmx.content.decode(), "the intruder sees their own item, not the owner's"
    assert not Vote.objects.exists()


def test_a_rater_cookie_of_one_study_does_not_open_another(rater):
    client = signed_in(rater)
    other = make_study()
    make_question(other)
    response = client.get(urls(other)["task"])
    assert response.status_code == 302 and response["Location"] == urls(other)["landing"]


def test_entering_sets_a_signed_http_only_cookie_and_no_session(rater):
    client = signed_in(rater)
    cookie = client.cookies[pages.rater_cookie_name(rater.study.slug)]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert cookie.value.split(":")[0] == str(rater.pk)  # the id, then a timestamp and the signature
    assert not Session.objects.exists()


@pytest.mark.parametrize("change", ["another rater's id", "a bad signature", "too old", "another study's"])
def test_a_rater_cookie_that_was_not_signed_for_this_study_and_rater_is_refused(rater, change):
    """Each of these lands on the entry page; the rater's own cookie, put back, works again."""
    client = signed_in(rater)
    task, name = urls(rater.study)["task"], pages.rater_cookie_name(rater.study.slug)
    token = token_in(client.get(task))
    own = client.cookies[name].value
    other = make_rater(rater.study)
    if change == "another rater's id":
        client.cookies[name] = f"{other.pk}{own[own.index(':') :]}"
    elif change == "a bad signature":
        client.cookies[name] = own[:-2] + ("AA" if not own.endswith("AA") else "BB")
    elif change == "too old":
        with mock.patch("django.core.signing.time.time", return_value=time.time() - settings.SESSION_COOKIE_AGE - 60):
            response = HttpResponse()
            response.set_signed_cookie(name, str(rater.pk), salt=pages._RATER_SALT)
        client.cookies[name] = response.cookies[name].value
    else:  # signed with the key, but naming a rater of another study (the statement checks it)
        stranger = make_rater(make_study())
        response = HttpResponse()
        response.set_signed_cookie(name, str(stranger.pk), salt=pages._RATER_SALT)
        client.cookies[name] = response.cookies[name].value
    refused = client.get(task)
    assert refused.status_code == 302 and refused["Location"] == urls(rater.study)["landing"]
    # A vote with it records nothing.
    vote = client.post(task, {"token": token, "choice": "first"})
    assert vote.status_code == 302 and vote["Location"] == urls(rater.study)["landing"]
    assert not Vote.objects.exists()
    client.cookies[name] = own
    assert client.get(task).status_code == 200


def test_a_vote_in_a_study_put_back_to_draft_is_refused_and_records_nothing(rater):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    token = token_in(client.get(task))
    Study.objects.filter(pk=rater.study_id).update(status=Study.Status.DRAFT)
    assert client.post(task, {"token": token, "choice": "first"}).status_code == 404
    assert not Vote.objects.exists() and Lease.objects.get(token=token).voted_at is None


def test_a_vote_after_the_study_was_renamed_is_not_taken_by_the_study_now_at_the_old_address(rater):
    """The cookie is named for the study's address: the study now at the old slug must not take
    the vote, and entering again under the new address resumes the same item."""
    client = signed_in(rater)
    old = urls(rater.study)
    token = token_in(client.get(old["task"]))
    Study.objects.filter(pk=rater.study_id).update(slug="renamed")
    squatter = make_study(slug=rater.study.slug)
    make_question(squatter)
    response = client.post(old["task"], {"token": token, "choice": "first"})
    assert response.status_code == 302 and response["Location"] == old["landing"]
    assert not Vote.objects.exists()
    rater.study.refresh_from_db()
    client = signed_in(rater)
    new = urls(rater.study)
    assert token_in(client.get(new["task"])) == token
    response = client.post(new["task"], {"token": token, "choice": "first", "client_ms": "4000"})
    assert response.status_code == 302 and response["Location"] == new["task"]
    assert Vote.objects.get().rater_id == rater.pk


def test_a_vote_of_a_rater_who_was_deleted_goes_to_the_entry_page(rater):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    token = token_in(client.get(task))
    Rater.objects.filter(pk=rater.pk).delete()
    htmx = client.post(task, {"token": token, "choice": "first"}, **HX)
    assert htmx["HX-Redirect"] == urls(rater.study)["landing"]
    assert not Vote.objects.exists()


def test_the_page_shows_no_item_ids_results_or_which_answer_is_perturbed(rater):
    html = signed_in(rater).get(urls(rater.study)["task"]).content.decode()
    lease = Lease.objects.get()
    assert f'value="{lease.item_id}"' not in html
    for word in ("a1", "a2", r"perturb\w*", "control", "human_a1_first", "votes", "score"):
        assert not re.search(rf"\b{word}\b", html, re.IGNORECASE), word


def test_a_malformed_vote_is_refused_with_the_same_item_shown_again(rater):
    client = signed_in(rater)
    token = token_in(client.get(urls(rater.study)["task"]))
    response = client.post(urls(rater.study)["task"], {"token": token, "choice": "left"})
    assert response.status_code == 400
    assert token_in(response) == token
    assert not Vote.objects.exists()


# --- task: page and fragment ---------------------------------------------------------------


def test_the_task_page_shows_both_answers_rendered_and_sanitised(db):
    study = make_study(votes_per_item=1)
    make_question(
        study,
        text="What is **H2O**?",
        a1="Water. <img src=x onerror=alert(1)> :droplet: 💧",
        a2="| a | b |\n|---|---|\n| 1 | 2 |\n\n<iframe src='x'></iframe><style>b{}</style>",
    )
    html = signed_in(make_rater(study)).get(urls(study)["task"]).content.decode()
    assert "<strong>H2O</strong>" in html and "💧" in html and "<table>" in html
    for bad in ("onerror", "<iframe", "<style>b", "<img"):
        assert bad not in html
    assert html.count('type="submit" name="choice"') == 3
    assert 'type="checkbox" name="not_familiar"' in html and 'for="not-familiar"' in html
    assert "0 / 45" in html


def test_a_plain_post_records_the_vote_and_redirects_to_the_next_item(rater):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    token = token_in(client.get(task))
    response = client.post(task, {"token": token, "choice": "second", "not_familiar": "on", "client_ms": "4321"})
    assert response.status_code == 302 and response["Location"] == task
    vote = Vote.objects.get()
    assert (vote.choice_shown, vote.not_familiar, vote.client_ms) == ("second", True, 4321)
    assert vote.server_ms is not None
    follow = client.get(task)
    assert token_in(follow) != token and b"1 / 3" in follow.content


def test_an_htmx_post_answers_with_the_next_item_fragment(rater):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    token = token_in(client.get(task))
    response = client.post(task, {"token": token, "choice": "tie", "client_ms": "2500"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="task"') and "<html" not in html
    assert token_in(response) != token and "1 / 3" in html
    assert response["Vary"] == "HX-Request, Cookie" or "HX-Request" in response["Vary"]


def test_a_double_submission_is_stored_once(rater):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    token = token_in(client.get(task))
    client.post(task, {"token": token, "choice": "first"}, **HX)
    client.post(task, {"token": token, "choice": "second"}, **HX)
    assert Vote.objects.count() == 1 and Vote.objects.get().choice_shown == "first"


def test_the_last_vote_leads_to_the_completion_code(db):
    study = make_study(target_per_rater=1, completion_code="C0DE-77")
    make_question(study)
    client = signed_in(make_rater(study))
    task, done = urls(study)["task"], urls(study)["done"]
    token = token_in(client.get(task))
    response = client.post(task, {"token": token, "choice": "tie"}, **HX)
    assert response["HX-Redirect"] == done
    page = client.get(done)
    assert b"C0DE-77" in page.content
    assert client.get(task)["Location"] == done


def test_a_rater_blocked_only_by_other_raters_leases_is_asked_to_wait_without_the_code(db):
    study = make_study(votes_per_item=1, target_per_rater=5, completion_code="NOT-YET")
    make_question(study)
    holder, waiting = make_rater(study), make_rater(study)
    assert lease_next(rater=holder) is not None  # the only slot is now on holder's lease
    client = signed_in(waiting)
    assert client.get(urls(study)["task"])["Location"] == urls(study)["done"]
    page = client.get(urls(study)["done"])
    assert b"Please wait a moment" in page.content
    assert b"NOT-YET" not in page.content


def test_a_rater_with_nothing_left_to_rate_gets_the_code_before_the_target_but_only_after_a_vote(db):
    study = make_study(votes_per_item=1, target_per_rater=5, completion_code="ALL-DONE")
    make_question(study)
    first = signed_in(make_rater(study))
    token = token_in(first.get(urls(study)["task"]))
    response = first.post(urls(study)["task"], {"token": token, "choice": "tie", "client_ms": 5000}, **HX)
    assert response["HX-Redirect"] == urls(study)["done"]
    page = first.get(urls(study)["done"])
    assert b"ALL-DONE" in page.content and b"no more items for you" in page.content
    # Someone who got in before the study filled up, and never voted, gets no code.
    page = signed_in(make_rater(study)).get(urls(study)["done"])
    assert b"ALL-DONE" not in page.content and b"no items for you" in page.content


def test_prolific_raters_see_their_code_and_a_way_back_to_prolific_with_it(anon_client):
    study = make_study(
        target_per_rater=1,
        completion_code="PRO1",
        prolific_completion_url="https://app.prolific.com/submissions/complete",
    )
    make_question(study)
    anon_client.post(urls(study)["landing"] + "?PROLIFIC_PID=pp1&STUDY_ID=s&SESSION_ID=x", {"consent": "on"})
    token = token_in(anon_client.get(urls(study)["task"]))
    anon_client.post(urls(study)["task"], {"token": token, "choice": "first"})
    response = anon_client.get(urls(study)["done"])
    # A page, not a redirect: were Prolific unreachable, the rater would still have their code.
    assert response.status_code == 200
    back = "https://app.prolific.com/submissions/complete?cc=PRO1"
    assert response.context["code"] == "PRO1" and response.context["platform_return"]["url"] == back
    page = response.content.decode()
    assert '<output id="completion-code"' in page and f'href="{back}"' in page and f'data-return-to="{back}"' in page


def test_the_done_page_sends_an_unfinished_rater_back_to_work(rater):
    client = signed_in(rater)
    response = client.get(urls(rater.study)["done"])
    assert response.status_code == 302 and response["Location"] == urls(rater.study)["task"]


# --- query counts on the hot views ---------------------------------------------------------


def test_the_task_page_query_count_is_pinned(rater, django_assert_num_queries):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    client.get(task)  # the lease is handed out
    # the rater with their study and their pending lease with its item, question and answers
    # (the cookie is read without a query)
    with django_assert_num_queries(1):
        client.get(task)


def test_the_first_page_hands_out_an_item_with_a_pinned_query_count(rater, django_assert_num_queries):
    client = signed_in(rater)
    # the rater with their study and pending lease (none); the pending lease read again (lease_next
    # is not told "none": a read before a vote would be stale); then in a transaction (a savepoint
    # inside the test's, and its release): the rater locked, the pending lease again, the free
    # slot chosen (and locked, SKIP LOCKED) then taken by a conditional UPDATE, the lease
    # inserted; after the transaction, the lease with its item, question and answers; the same
    # on both databases
    with django_assert_num_queries(10):
        response = client.get(urls(rater.study)["task"])
    assert token_in(response)


def test_a_vote_hands_out_the_next_item_and_the_page_after_it_is_a_read(rater, django_assert_num_queries):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    token = token_in(client.get(task))
    # in a transaction (savepoint and release): the rater with their study and the voted lease,
    # locked together, with its answers' lengths (no read of the rater before it); the vote
    # inserted, the lease, the slot and the rater updated, the next free slot chosen and taken
    # and its lease inserted, and last the study's data version moved on (the rate is not
    # checked: the rater has fewer votes in all than it allows)
    with django_assert_num_queries(11):
        assert client.post(task, {"token": token, "choice": "first", "client_ms": "3000"}).status_code == 302
    with django_assert_num_queries(1):  # the rater with their study and the lease the vote handed out
        response = client.get(task)
    assert token_in(response) != token


def test_the_htmx_vote_query_count_is_pinned(rater, django_assert_num_queries):
    client = signed_in(rater)
    task = urls(rater.study)["task"]
    token = token_in(client.get(task))
    # the form's vote (with the study's data version moved on), then the lease it handed out
    # with what the fragment shows
    with django_assert_num_queries(12):
        response = client.post(task, {"token": token, "choice": "first", "client_ms": "3000"}, **HX)
    assert response.status_code == 200
    assert Slot.objects.filter(vote__isnull=False).count() == 1
    assert lease_next(rater=rater).token == token_in(response)
