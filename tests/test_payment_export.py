"""Crowd work and payment: the votes CSV says which votes count and why not, the rater monitor
shows too-fast votes, status and total time and downloads as CSV, and the payment file is in the
shape Prolific's bulk pages take, for staff only, the one export with platform ids."""

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from analysis import current_report, exports, rater_monitor
from annotations.models import Vote
from tests.factories import human_pool, make_question, make_rater, make_study

T0 = timezone.now() - timedelta(hours=2)


def vote(item, pool, rater, *, ms=5000, not_familiar=False, late=False, choice="first"):
    counted = not not_familiar and ms >= 1000
    return Vote.objects.create(
        item=item,
        judge=pool,
        rater=rater,
        shown_first="a1",
        choice_shown=choice,
        not_familiar=not_familiar,
        client_ms=ms,
        meta={"assignment": {"counted": counted, "too_fast": ms < 1000, "late": late}},
    )


@pytest.fixture
def crowd(db):
    """Three raters on four questions (threshold 1000 ms): alice finished with one too-fast
    vote and one late vote; bob failed the attention checks; carol left after one
    not-familiar vote."""
    study = make_study(slug="crowd", min_response_ms=1000, gold_min_accuracy=0.8)
    items = [make_question(study).items.get() for _ in range(4)]
    pool = human_pool(study)
    alice = make_rater(
        study, participant_id="PROLIFIC-ALICE", source="prolific", created_at=T0, gold_seen=3, gold_correct=3
    )
    alice.finished_at, alice.completion_code = T0 + timedelta(minutes=12, seconds=5), "C0DE"
    alice.last_seen_at = alice.finished_at
    alice.save()
    bob = make_rater(
        study,
        participant_id="PROLIFIC-BOB",
        source="prolific",
        created_at=T0,
        last_seen_at=T0 + timedelta(seconds=90),
        gold_seen=3,
        gold_correct=1,
        flagged=True,
        flag_reason="attention checks: 1/3 correct, under 80%",
    )
    carol = make_rater(study, participant_id="PROLIFIC-CAROL", created_at=T0, last_seen_at=T0 + timedelta(seconds=30))
    votes = {
        "alice_ok": vote(items[0], pool, alice),
        "alice_fast": vote(items[1], pool, alice, ms=300),
        "alice_late": vote(items[2], pool, alice, late=True),
        "bob": vote(items[0], pool, bob, choice="second"),
        "carol_nf": vote(items[1], pool, carol, not_familiar=True),
    }
    return study, votes


def read(rows) -> list[dict]:
    return list(csv.DictReader(io.StringIO("".join(exports.csv_lines(rows)))))


def read_response(response) -> list[dict]:
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_votes_csv_says_which_votes_count_and_why_the_others_do_not(crowd):
    study, votes = crowd
    rows = {int(r["vote_id"]): r for r in read(exports.votes_rows(study))}
    assert exports.VOTE_COLUMNS[-3:] == ["counted", "excluded_because", "late"]
    expected = {
        "alice_ok": ("True", "", "False"),
        "alice_fast": ("False", "too_fast", "False"),
        "alice_late": ("True", "", "True"),  # late votes count: they get a slot of their own
        "bob": ("False", "failed_attention_checks", "False"),
        "carol_nf": ("False", "not_familiar", "False"),
    }
    for name, (counted, because, late) in expected.items():
        row = rows[votes[name].id]
        assert (row["counted"], row["excluded_because"], row["late"]) == (counted, because, late), name
    result = current_report.study_analyze(study=study)
    assert sum(r["counted"] == "True" for r in rows.values()) == result["filters"]["n_votes_counted"]


def test_a_vote_excluded_for_several_reasons_names_them_all(crowd):
    study, votes = crowd
    slow_bob = Vote.objects.create(
        item=votes["carol_nf"].item,
        judge=votes["bob"].judge,
        rater=votes["bob"].rater,
        shown_first="a1",
        choice_shown="first",
        client_ms=10,
        not_familiar=True,
    )
    row = next(r for r in read(exports.votes_rows(study)) if int(r["vote_id"]) == slow_bob.id)
    assert row["excluded_because"] == "failed_attention_checks;too_fast;not_familiar"


def test_the_rater_monitor_counts_too_fast_votes_and_gives_status_and_total_time(crowd):
    study, _ = crowd
    rows = {r["rater"].participant_id: r for r in rater_monitor.raters_monitor(study=study)}
    alice, bob, carol = rows["PROLIFIC-ALICE"], rows["PROLIFIC-BOB"], rows["PROLIFIC-CAROL"]
    assert (alice["status"], alice["votes"], alice["counted"], alice["too_fast"]) == ("finished", 3, 2, 1)
    assert alice["total_seconds"] == 12 * 60 + 5
    assert (bob["status"], bob["total_seconds"]) == ("failed attention checks", 90)
    assert (carol["status"], carol["counted"], carol["not_familiar_votes"], carol["total_seconds"]) == (
        "partial",
        0,
        1,
        30,
    )


def test_the_rater_monitor_page_and_csv(crowd, staff_client):
    study, _ = crowd
    body = staff_client.get(reverse("analysis:raters", args=["crowd"])).content.decode()
    assert "Too fast" in body and "Total time" in body and "12 min 05 s" in body and "failed attention checks" in body
    rows = read_response(staff_client.get(reverse("analysis:export", args=["crowd", "raters"])))
    assert len(rows) == 3
    assert all(r["rater"].startswith("R") for r in rows)
    assert "PROLIFIC" not in str(rows)  # pseudonyms only: the payment file is the one with platform ids
    alice = next(r for r in rows if r["status"] == "finished")
    assert (alice["votes"], alice["counted_votes"], alice["too_fast"], alice["total_seconds"]) == ("3", "2", "1", "725")


def test_the_payment_file_has_what_prolifics_bulk_pages_take(crowd, staff_client):
    response = staff_client.get(reverse("analysis:payment", args=["crowd"]), {"bonus_per_counted_vote": "0.25"})
    assert "WITH-PLATFORM-IDS" in response["Content-Disposition"]
    rows = {r["participant_id"]: r for r in read_response(response)}
    assert list(next(iter(rows.values()))) == exports.PAYMENT_COLUMNS
    alice, bob, carol = rows["PROLIFIC-ALICE"], rows["PROLIFIC-BOB"], rows["PROLIFIC-CAROL"]
    assert (alice["status"], alice["suggested_action"], alice["bonus"], alice["completion_code"]) == (
        "finished",
        "approve",
        "0.50",
        "C0DE",
    )
    assert (alice["total_seconds"], alice["attention_check_score"], alice["attention_checks"]) == ("725", "1.0", "3/3")
    assert (bob["status"], bob["suggested_action"], bob["bonus"]) == ("failed attention checks", "reject", "0.00")
    assert (carol["status"], carol["suggested_action"], carol["bonus"], carol["votes"]) == (
        "partial",
        "review",
        "0.00",
        "1",
    )
    assert carol["attention_check_score"] == ""  # no attention checks seen: no score, not 0


def test_the_payment_file_rejects_a_bad_bonus_and_is_for_staff_only(crowd, staff_client, anon_client, user_client):
    url = reverse("analysis:payment", args=["crowd"])
    response = staff_client.get(url, {"bonus_per_counted_vote": "-1"})
    assert response.status_code == 400 and "bonus_per_counted_vote" in response.content.decode()
    for client in (anon_client, user_client):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_an_empty_study_gives_a_payment_file_with_only_its_header(db, staff_client):
    make_study(slug="nobody")
    text = b"".join(staff_client.get(reverse("analysis:payment", args=["nobody"])).streaming_content).decode()
    assert text.strip() == ",".join(exports.PAYMENT_COLUMNS)


@pytest.mark.parametrize(
    ("too_fast", "votes", "action"),
    [(0, 0, "approve"), (1, 3, "approve"), (2, 6, "approve"), (2, 5, "review"), (1, 1, "review"), (3, 3, "review")],
)
def test_a_finished_rater_is_suggested_for_review_with_more_than_a_third_of_their_votes_too_fast(
    db, too_fast, votes, action
):
    rater = make_rater(make_study())
    assert rater_monitor.suggested_action(rater, "finished", votes, too_fast)[0] == action


def test_the_payment_file_and_the_monitor_say_why_a_finished_rater_is_not_approved(crowd, staff_client):
    study, votes = crowd
    alice = votes["alice_ok"].rater
    for item in [make_question(study).items.get() for _ in range(2)]:  # 3 of 5 votes too fast now
        vote(item, votes["alice_ok"].judge, alice, ms=200)
    rows = {
        r["participant_id"]: r for r in read_response(staff_client.get(reverse("analysis:payment", args=["crowd"])))
    }
    alice_row = rows["PROLIFIC-ALICE"]
    assert (alice_row["status"], alice_row["suggested_action"], alice_row["bonus"]) == ("finished", "review", "0.00")
    assert alice_row["suggested_because"] == "3 of 5 votes too fast"
    assert rows["PROLIFIC-BOB"]["suggested_because"] == "failed the attention checks"
    assert rows["PROLIFIC-CAROL"]["suggested_because"] == "did not finish"
    body = staff_client.get(reverse("analysis:raters", args=["crowd"])).content.decode()
    assert "review: 3 of 5 votes too fast" in body


def two_more_finished(study, votes) -> None:
    """A second finished Prolific rater (Dora) and a finished rater from a direct link (Eve, not
    Prolific's), one counted vote each."""
    dora = make_rater(study, participant_id="PROLIFIC-DORA", source="prolific", created_at=T0, gold_seen=2)
    eve = make_rater(study, participant_id="direct-eve", created_at=T0, gold_seen=2)
    for rater in (dora, eve):
        rater.gold_correct, rater.finished_at = 2, T0 + timedelta(minutes=5)
        rater.save()
        vote(votes["bob"].item, votes["bob"].judge, rater)


def test_the_paste_lists_hold_just_what_prolifics_bulk_approve_and_bonus_pages_take(crowd, staff_client):
    study, votes = crowd
    two_more_finished(study, votes)
    url = reverse("analysis:payment", args=["crowd"])
    approve = staff_client.get(url, {"paste": "approve"})
    assert approve["Content-Type"].startswith("text/plain")
    assert "WITH-PLATFORM-IDS" in approve["Content-Disposition"]
    assert approve.content.decode() == "PROLIFIC-ALICE\nPROLIFIC-DORA\n"
    bonus = staff_client.get(url, {"paste": "bonus", "bonus_per_counted_vote": "0.25"}).content.decode()
    # Alice: 2 counted votes, Dora: 1; Bob (reject) and Carol (review) get none; Eve is not on Prolific.
    assert bonus == "PROLIFIC-ALICE,0.50\nPROLIFIC-DORA,0.25\n"
    no_bonus = staff_client.get(url, {"paste": "bonus"})  # an empty file, once, read as "nobody to pay"
    assert no_bonus.status_code == 400 and "needs a bonus per counted vote above 0" in no_bonus.content.decode()
    response = staff_client.get(url, {"paste": "reject"})
    assert response.status_code == 400 and "paste" in response.content.decode()


def test_the_monitors_bonus_field_previews_the_total_and_the_links_carry_it(crowd, staff_client):
    study, votes = crowd
    two_more_finished(study, votes)
    url = reverse("analysis:raters", args=["crowd"])
    html = staff_client.get(url).content.decode()
    assert 'name="bonus_per_counted_vote"' in html and 'id="bonus-form"' in html
    assert "?paste=bonus" not in html and "set a bonus per counted vote above first" in html

    html = staff_client.get(url, {"bonus_per_counted_vote": "0.25"}).content.decode()
    # Alice 2 counted votes, Dora 1, Eve 1 (a direct link: in the payment file, not Prolific's list).
    assert "3 raters suggested for approval get a bonus, <strong>1.00</strong> in all" in html
    assert "2 of them came from Prolific, <strong>0.75</strong> in the bulk bonus list" in html
    link = reverse("analysis:payment", args=["crowd"]) + "?paste=bonus&amp;bonus_per_counted_vote=0.25"
    assert f'href="{link}"' in html
    assert 'value="0.25"' in html  # the field keeps what was typed
    fragment = staff_client.get(url, {"bonus_per_counted_vote": "0.25"}, HTTP_HX_REQUEST="true").content.decode()
    assert "bonus_per_counted_vote=0.25" in fragment.split(">", 1)[0]  # the refresh keeps it
    bonus = staff_client.get(link.replace("&amp;", "&")).content.decode()
    assert bonus == "PROLIFIC-ALICE,0.50\nPROLIFIC-DORA,0.25\n"

    bad = staff_client.get(url, {"bonus_per_counted_vote": "-1"})
    assert bad.status_code == 400 and 'id="bonus-errors"' in bad.content.decode()
