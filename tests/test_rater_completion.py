"""Completion rules a paid rater cannot bend: the target is the study's, the completion code
comes only after work, a full study takes nobody new, codes can be per rater, and the target
is one a rater can reach."""

import re
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotations.assignment import lease_next, vote_record
from annotations.completion import rater_can_get_more, rater_finish
from annotations.models import Lease, Rater, Study, items_reachable
from tests.factories import make_question, make_rater, make_study, make_variant

pytestmark = pytest.mark.django_db

PROLIFIC = "?PROLIFIC_PID={pid}&STUDY_ID=s1&SESSION_ID=x1"
PROLIFIC_URL = "https://app.prolific.com/submissions/complete"


def urls(study):
    return {name: reverse(f"annotations:{name}", args=[study.slug]) for name in ("landing", "task", "done")}


def token_in(response) -> str:
    return re.search(r'name="token" value="([^"]+)"', response.content.decode()).group(1)


def enter(client, study, pid: str, *, prolific: bool = False, **extra):
    if prolific:
        return client.post(urls(study)["landing"] + PROLIFIC.format(pid=pid), {"consent": "on", **extra})
    return client.post(urls(study)["landing"], {"participant_id": pid, "consent": "on", **extra})


def test_a_rater_cannot_lower_their_own_target(client):
    study = make_study(target_per_rater=3, completion_code="DONE-3")
    for _ in range(3):
        make_question(study)
    page = client.get(urls(study)["landing"])
    assert b'name="target"' not in page.content
    assert enter(client, study, "P1", target="1").status_code == 302
    assert Rater.objects.get().target == 3
    token = token_in(client.get(urls(study)["task"]))
    client.post(urls(study)["task"], {"token": token, "choice": "tie", "client_ms": 5000})
    assert client.get(urls(study)["task"]).status_code == 200, "one vote is not the target"
    assert b"DONE-3" not in client.get(urls(study)["done"]).content


def test_a_prolific_rater_whose_only_item_is_held_by_someone_else_waits_and_gets_no_code(client):
    study = make_study(
        votes_per_item=1, target_per_rater=5, completion_code="PRO-1", prolific_completion_url=PROLIFIC_URL
    )
    make_question(study)
    assert lease_next(rater=make_rater(study)) is not None  # the only slot is held
    enter(client, study, "pp1", prolific=True)
    assert client.get(urls(study)["task"])["Location"] == urls(study)["done"]
    done = client.get(urls(study)["done"])
    assert done.status_code == 200 and b"Please wait a moment" in done.content
    assert b"PRO-1" not in done.content and Rater.objects.get(participant_id="pp1").finished_at is None


def test_a_prolific_rater_with_nothing_more_to_get_is_given_the_way_back_with_the_code_only_after_a_vote(client):
    study = make_study(
        votes_per_item=1, target_per_rater=5, completion_code="PRO-2", prolific_completion_url=PROLIFIC_URL
    )
    make_question(study)
    make_question(study)
    enter(client, study, "pp2", prolific=True)
    token = token_in(client.get(urls(study)["task"]))
    other = make_rater(study)  # takes and answers the other item: nothing is left for pp2
    lease = lease_next(rater=other)
    vote_record(rater_id=other.pk, slug=other.study.slug, token=lease.token, choice_shown="tie", client_ms=5000)
    assert client.get(urls(study)["done"])["Location"] == urls(study)["task"], "pp2 has an item to answer"
    client.post(urls(study)["task"], {"token": token, "choice": "first", "client_ms": 5000})
    response = client.get(urls(study)["done"])
    assert response.status_code == 200 and response.context["platform_return"]["url"] == f"{PROLIFIC_URL}?cc=PRO-2"
    rater = Rater.objects.get(participant_id="pp2")
    assert rater.finished_at is not None and rater.completion_code == "PRO-2"


def test_anyone_entering_a_full_study_is_told_so_without_the_code(client):
    study = make_study(votes_per_item=1, target_per_rater=5, completion_code="FULL-1")
    make_question(study)
    first = make_rater(study)
    lease = lease_next(rater=first)
    vote_record(rater_id=first.pk, slug=first.study.slug, token=lease.token, choice_shown="tie", client_ms=5000)
    # The page keeps a form for those who took part (they type their id); a new id is refused.
    landing, refused = client.get(urls(study)["landing"]), enter(client, study, "late1")
    assert (landing.status_code, refused.status_code) == (200, 400)
    for page in (landing, refused):
        assert b"This study is full" in page.content and b"FULL-1" not in page.content
        assert b'name="participant_id"' in page.content
    assert b"Nobody has taken part with this id" in refused.content
    # A platform link names its rater: a new one gets no form at all.
    prolific = client.get(urls(study)["landing"] + PROLIFIC.format(pid="late2"))
    assert b"This study is full" in prolific.content and b'name="consent"' not in prolific.content
    assert enter(client, study, "late2", prolific=True).status_code == 200
    assert not Rater.objects.filter(participant_id__in=["late1", "late2"]).exists()
    # Someone who took part comes back through the same door and gets their code.
    assert enter(client, study, first.participant_id).status_code == 302
    assert b"FULL-1" in client.get(urls(study)["done"]).content


def test_a_rater_whose_platform_link_names_them_gets_back_into_a_full_study(client):
    study = make_study(votes_per_item=1, target_per_rater=5, completion_code="FULL-2")
    make_question(study)
    assert enter(client, study, "pp1", prolific=True).status_code == 302
    token = token_in(client.get(urls(study)["task"]))
    client.post(urls(study)["task"], {"token": token, "choice": "tie", "client_ms": 5000})
    client.cookies.clear()  # another browser
    page = client.get(urls(study)["landing"] + PROLIFIC.format(pid="pp1"))
    assert b"This study is full" not in page.content and b"Continue" in page.content
    assert enter(client, study, "pp1", prolific=True).status_code == 302
    assert b"FULL-2" in client.get(urls(study)["done"]).content


def test_a_finished_prolific_rater_coming_back_through_their_link_is_not_asked_to_consent_again(client):
    study = make_study(
        votes_per_item=2,
        target_per_rater=1,
        completion_code="BACK-1",
        prolific_completion_url=PROLIFIC_URL,
        consent="Your answers are stored under your Prolific id only.",
    )
    make_question(study)
    make_question(study)
    assert enter(client, study, "pp9", prolific=True).status_code == 302
    token = token_in(client.get(urls(study)["task"]))
    client.post(urls(study)["task"], {"token": token, "choice": "tie", "client_ms": 5000})
    assert b"BACK-1" in client.get(urls(study)["done"]).content
    client.cookies.clear()  # another browser, or the cookie gone
    page = client.get(urls(study)["landing"] + PROLIFIC.format(pid="pp9"))
    assert b'name="consent"' not in page.content and b"stored under your Prolific id" not in page.content
    assert b"Welcome back" in page.content and b"Continue" in page.content
    response = client.post(urls(study)["landing"] + PROLIFIC.format(pid="pp9"), {})  # no consent ticked
    assert response.status_code == 302 and response["Location"] == urls(study)["task"]
    done = client.get(urls(study)["done"])
    assert b"BACK-1" in done.content and Rater.objects.filter(participant_id="pp9").count() == 1
    # Someone new through a link is still asked, and refused without it.
    client.cookies.clear()
    new = client.get(urls(study)["landing"] + PROLIFIC.format(pid="pp10"))
    assert b'name="consent"' in new.content and b"Welcome back" not in new.content
    assert client.post(urls(study)["landing"] + PROLIFIC.format(pid="pp10"), {}).status_code == 400


def finish(client, study, pid: str, **entry) -> str:
    enter(client, study, pid, **entry)
    token = token_in(client.get(urls(study)["task"]))
    client.post(urls(study)["task"], {"token": token, "choice": "tie", "client_ms": 5000})
    return client.get(urls(study)["done"]).content.decode()


def test_a_rater_from_another_platform_is_sent_to_its_completion_url_with_their_code(client):
    study = make_study(
        votes_per_item=2,
        target_per_rater=1,
        completion_code="OTHER 1",
        platform_completion_url="https://panel.example.org/done?token={code}&s=7",
        prolific_completion_url=PROLIFIC_URL,
    )
    make_question(study)
    page = finish(client, study, "D1")
    assert 'data-return-to="https://panel.example.org/done?token=OTHER%201&amp;s=7"' in page
    assert "The platform you came from gets this code" in page and "OTHER 1" in page
    # A Prolific rater still goes back to Prolific, not to the other platform.
    client.cookies.clear()
    page = finish(client, study, "pp1", prolific=True)
    assert f'data-return-to="{PROLIFIC_URL}?cc=OTHER+1"' in page and "panel.example.org" not in page


def test_without_a_code_field_the_code_is_added_as_a_query_parameter_per_rater(client):
    study = make_study(
        votes_per_item=2, target_per_rater=1, per_rater_codes=True, platform_completion_url="https://x.example/end?a=1"
    )
    make_question(study)
    for pid in ("E1", "E2"):
        client.cookies.clear()
        page = finish(client, study, pid)
        code = Rater.objects.get(participant_id=pid).completion_code
        assert f'data-return-to="https://x.example/end?a=1&amp;code={code}"' in page


def test_a_completion_url_with_a_bad_field_is_refused_naming_the_field():
    for url, words in (
        ("https://x.example/?c={cod}", "unknown field(s) {cod}; allowed: {code}"),
        ("https://x.example/?c={code:>9}", "{code:>9} has a format after the name"),
        ("https://x.example/?c={code", "a lone '{'"),
    ):
        study = Study(title="t", slug="t", completion_code="C", platform_completion_url=url)
        with pytest.raises(ValidationError) as caught:
            study.full_clean()
        messages = caught.value.message_dict["platform_completion_url"]
        assert any(words in m and m.startswith("other platform's completion URL") for m in messages), messages
    study = Study(title="t", slug="t", platform_completion_url="https://x.example/?c={code}")
    with pytest.raises(ValidationError, match="completion_code"):
        study.full_clean()


def test_with_per_rater_codes_each_rater_gets_their_own_code_kept_on_the_rater(client):
    study = make_study(votes_per_item=2, target_per_rater=1, completion_code="SHARED", per_rater_codes=True)
    make_question(study)
    codes = []
    for pid in ("A1", "A2"):
        enter(client, study, pid)
        token = token_in(client.get(urls(study)["task"]))
        client.post(urls(study)["task"], {"token": token, "choice": "tie", "client_ms": 5000})
        page = client.get(urls(study)["done"]).content.decode()
        code = Rater.objects.get(participant_id=pid).completion_code
        assert code and code in page and "SHARED" not in page
        assert client.get(urls(study)["done"]).content.decode().count(code) == 1, "the code does not change"
        codes.append(code)
        client.cookies.clear()
    assert codes[0] != codes[1]


def test_a_rater_who_finished_is_listed_with_their_code():
    study = make_study(votes_per_item=2, target_per_rater=1, completion_code="LIST-1")
    make_question(study)
    rater = make_rater(study)
    lease = lease_next(rater=rater)
    vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", client_ms=5000)
    assert not rater_can_get_more(rater=rater)
    assert rater_finish(rater=rater) == "LIST-1"
    finished = Rater.objects.filter(study=study, finished_at__isnull=False)
    assert list(finished.values_list("participant_id", "completion_code")) == [(rater.participant_id, "LIST-1")]


@pytest.mark.parametrize(
    ("regular", "gold", "every", "most"),
    [
        (3, 0, 0, 3),
        (3, 5, 0, 3),  # no cadence: attention checks are never handed out
        (4, 2, 2, 6),  # r r g r r g
        (4, 1, 2, 5),  # r r g r r, then a gold turn without gold takes nothing more: no regular left
        (36, 4, 10, 39),  # the demo: gold at 11, 22, 33; the 40th would be regular, and none is left
        (0, 3, 1, 0),
    ],
)
def test_the_most_items_one_rater_can_get_follow_the_attention_check_cadence(regular, gold, every, most):
    assert items_reachable(regular=regular, gold=gold, gold_every=every) == most


def test_the_most_items_counts_one_item_per_question_and_approved_items_only():
    study = make_study(target_per_rater=2)
    for _ in range(2):
        make_variant(make_question(study), kind="reference")
    make_variant(make_question(study), review_status="pending", item=True)
    assert study.most_items_per_rater() == 3
    Study.objects.filter(pk=study.pk).update(one_variant_per_question=False)
    study.refresh_from_db()
    assert study.most_items_per_rater() == 5


def test_the_admin_shows_the_most_items_and_lowers_a_target_above_it_with_a_warning(admin_client):
    study = make_study(target_per_rater=2)
    for _ in range(2):
        make_question(study)
    change = reverse("admin:annotations_study_change", args=[study.pk])
    page = admin_client.get(change)
    assert b"most items one rater can get" in page.content.lower()
    form = page.context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update({"target_per_rater": 3, "status": study.status, "created_at_0": "2026-01-01", "created_at_1": "00:00"})
    saved = admin_client.post(change, data, follow=True)
    assert saved.status_code == 200
    assert "lowered from 3 to 2: one rater can get at most 2 items" in saved.content.decode()
    study.refresh_from_db()
    assert study.target_per_rater == 2
    data["target_per_rater"] = 2
    quiet = admin_client.post(change, data, follow=True)
    assert "lowered" not in quiet.content.decode()


def test_a_rater_in_the_demo_study_can_reach_its_target():
    call_command("load_demo", no_simulated=True, verbosity=0)
    study = Study.objects.get(slug="demo")
    assert study.target_per_rater == study.most_items_per_rater()
    rater = make_rater(study)
    while (lease := lease_next(rater=rater)) is not None:
        vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", client_ms=60_000)
    rater.refresh_from_db()
    assert rater.votes_done == study.target_per_rater
    assert rater.gold_seen == study.target_per_rater // (study.gold_every + 1)


def test_every_answer_counts_toward_the_target_and_the_payment_file_asks_to_review_a_hurried_rater(client):
    """Not familiar is an honest answer and too fast is still an answer: both count toward the
    target (the code follows), neither counts for the metrics, and a rater with more than a
    third of their votes too fast is suggested for review in the payment file, not approval."""
    from analysis import rater_monitor

    study = make_study(target_per_rater=3, completion_code="DONE-3", min_response_ms=2000, ms_per_word=0, gold_every=0)
    for _ in range(4):
        make_question(study)
    enter(client, study, "P1")
    for not_familiar, ms in ((True, 5000), (False, 100), (False, 100)):  # 2 of 3 too fast
        form = {"token": token_in(client.get(urls(study)["task"])), "choice": "tie", "client_ms": ms}
        # Handed out as long ago as the browser says: a vote's time is at most the server's.
        Lease.objects.filter(token=form["token"]).update(created_at=timezone.now() - timedelta(milliseconds=ms))
        client.post(urls(study)["task"], {**form, **({"not_familiar": "on"} if not_familiar else {})})
    assert b"DONE-3" in client.get(urls(study)["done"]).content
    [row] = rater_monitor.raters_monitor(study=study)
    assert (row["votes"], row["counted"], row["too_fast"], row["status"]) == (3, 0, 2, "finished")
    assert (row["action"], row["action_because"]) == ("review", "2 of 3 votes too fast")


def test_a_rater_who_finished_before_the_study_had_a_code_gets_it_once_it_has_one(client):
    study = make_study(target_per_rater=1, completion_code="")
    make_question(study)
    enter(client, study, "early")
    client.post(urls(study)["task"], {"token": token_in(client.get(urls(study)["task"])), "choice": "tie"})
    assert b"Thank you" in client.get(urls(study)["done"]).content
    finished = Rater.objects.get(participant_id="early").finished_at
    assert finished is not None
    Study.objects.filter(pk=study.pk).update(completion_code="LATER-1")
    assert b"LATER-1" in client.get(urls(study)["done"]).content
    rater = Rater.objects.get(participant_id="early")
    assert (rater.completion_code, rater.finished_at) == ("LATER-1", finished)


def test_a_prolific_redirect_needs_a_completion_code():
    from django.core.exceptions import ValidationError

    study = make_study(completion_code=" ", prolific_completion_url=PROLIFIC_URL)
    with pytest.raises(ValidationError, match="completion code"):
        study.full_clean()
    study.per_rater_codes = True
    study.full_clean()
