"""What a judge sees: the judge's admin page shows the exact messages it sends for any item,
display order and label order, and each vote of a run links to the messages it was given. Both
are rendered by the runner's own function, and checked here against what a real server on
loopback received; every text on them is escaped."""

import html
import re

import pytest
from django.urls import reverse

from annotations.models import Vote
from judges.services import judge_run_execute, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study, make_variant
from tests.judge_server import JudgeServer

HOSTILE = "Blue <script>alert('a')</script> & <b>bold</b>."


@pytest.fixture
def server():
    with JudgeServer() as srv:
        yield srv


@pytest.fixture
def study(db):
    study = make_study(slug="sky")
    question = make_question(study, a1=HOSTILE, a2="It looks blue.")
    make_variant(question, kind="bandwagon", text="It looks blue.", context="Most readers preferred {A2}.")
    return study


def shown_messages(page) -> list[tuple[str, str]]:
    """(role, content) of each message on a prompt page, unescaped as a reader reads them."""
    found = re.findall(r"<h2>(\w+) message</h2>\s*<pre>(.*?)</pre>", page.content.decode(), flags=re.S)
    return [(role.lower(), html.unescape(content)) for role, content in found]


def sent(server) -> set[tuple[tuple[str, str], ...]]:
    return {tuple((m["role"], m["content"]) for m in entry["body"]["messages"]) for entry in server.log}


def test_every_votes_prompt_link_shows_what_the_server_received_escaped(staff_client, server, study):
    config = make_llm_judge(base_url=server.base_url, prompt_style="vote_only", votes_per_item=4, label_schemes=["ab"])
    run = judge_run_execute(run_id=judge_run_start(study=study, judge=config.judge, enqueue=False).pk)
    assert run.status == "done"
    votes = list(Vote.objects.filter(run_id=run.pk))
    assert len(votes) == 8
    shown = set()
    listing = staff_client.get(reverse("admin:annotations_vote_changelist") + f"?run_id__exact={run.pk}")
    for vote in votes:
        url = reverse("admin:judges_judgerun_vote_prompt", args=[run.pk, vote.pk])
        assert f'href="{url}"' in listing.content.decode()  # the votes list links to each one's prompt
        page = staff_client.get(url)
        assert page.status_code == 200
        assert "<script>alert" not in page.content.decode()  # the answer's markup is text here
        shown.add(tuple(shown_messages(page)))
    assert shown == sent(server)  # four prompts per item: both display orders x both label orders
    assert any("Most readers preferred A." in m[-1][1] for m in shown)  # the context line, as each vote labels it
    assert any("Most readers preferred B." in m[-1][1] for m in shown)
    vote_page = staff_client.get(reverse("admin:annotations_vote_change", args=[votes[0].pk])).content.decode()
    assert reverse("admin:judges_judgerun_vote_prompt", args=[run.pk, votes[0].pk]) in vote_page


def test_the_judges_page_shows_the_messages_it_sends_for_the_item_and_orders_chosen(staff_client, server, study):
    config = make_llm_judge(base_url=server.base_url, prompt_style="vote_only", votes_per_item=4, label_schemes=["ab"])
    judge_run_execute(run_id=judge_run_start(study=study, judge=config.judge, enqueue=False).pk)
    url = reverse("admin:judges_llmjudge_prompt", args=[config.pk])
    assert url in staff_client.get(reverse("admin:judges_llmjudge_change", args=[config.pk])).content.decode()
    item = study.items.get(kind__slug="bandwagon")
    seen = set()
    for shown_first in ("a1", "a2"):
        for label_order in ("ab", "ba"):
            query = {"study": study.pk, "item": item.pk, "shown_first": shown_first, "label_order": label_order}
            page = staff_client.get(url, query | {"scheme": "ab"})
            assert page.status_code == 200
            assert "<script>alert" not in page.content.decode() and "&lt;script&gt;" in page.content.decode()
            seen.add(tuple(shown_messages(page)))
    assert len(seen) == 4 and seen <= sent(server)
    opened = staff_client.get(url)  # the latest study's first item, A1 first, the first scheme
    assert opened.status_code == 200 and shown_messages(opened)


def test_the_prompt_pages_are_for_staff_only_and_name_a_bad_choice(staff_client, anon_client, server, study):
    config = make_llm_judge(base_url=server.base_url, label_schemes=["ab"])
    url = reverse("admin:judges_llmjudge_prompt", args=[config.pk])
    assert anon_client.get(url).status_code == 302
    page = staff_client.get(url, {"study": "999999", "shown_first": "a1"})
    assert page.status_code == 400 and "Select a valid choice" in page.content.decode()
    # An item of another study (the study was changed in the form): the chosen study's first item.
    other = make_study()
    first = make_question(other).items.get()
    page = staff_client.get(url, {"study": other.pk, "item": study.items.first().pk})
    assert (
        page.status_code == 200
        and f'Item <a href="{reverse("admin:annotations_comparisonitem_change", args=[first.pk])}">'
        in page.content.decode()
    )
