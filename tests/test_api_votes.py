"""The vote list: cursor pages by id (complete, no duplicates, constant cost), its filters, and
400s that name the bad parameter."""

import base64
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotations.models import Vote
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant, make_vote

URL = "/api/v1/votes/"


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [v["id"] for v in response.json()["results"]]


@pytest.fixture
def many_votes(small_study):
    """301 human votes on one study (3 items x 100 raters + 1), oldest first in id order."""
    pool = human_pool(small_study)
    items = list(small_study.items.all())
    rows = []
    for _ in range(100):
        rater = make_rater(small_study)
        rows += [
            Vote(item=item, judge=pool, rater=rater, shown_first="a1", choice_shown="tie", choice="tie")
            for item in items
        ]
    Vote.objects.bulk_create(rows)
    make_vote(items[0], pool)
    return list(Vote.objects.order_by("id").values_list("id", flat=True))


def test_cursor_pages_go_through_every_vote_once_in_id_order(many_votes, token_client, django_assert_num_queries):
    seen, url, pages = [], f"{URL}?page_size=40", 0
    while url:
        with django_assert_num_queries(2):  # token + user, the page: the same on every page
            response = token_client.get(url)
        seen += ids(response)
        url, pages = response.json()["next"], pages + 1
    assert seen == many_votes
    assert pages == 8


def test_a_new_vote_arriving_while_paging_is_neither_skipped_nor_repeated(many_votes, token_client, small_study):
    first = token_client.get(URL, {"page_size": 100})
    new = make_vote(small_study.items.first(), human_pool(small_study), shown_first="a2", choice_shown="first")
    seen, url = ids(first), first.json()["next"]
    while url:
        response = token_client.get(url)
        seen += ids(response)
        url = response.json()["next"]
    assert seen == [*many_votes, new.pk]


def test_previous_links_lead_back(many_votes, token_client):
    first = token_client.get(URL, {"page_size": 50})
    second = token_client.get(first.json()["next"])
    back = token_client.get(second.json()["previous"])
    assert ids(back) == ids(first)


def test_page_size_is_capped(many_votes, token_client):
    assert len(ids(token_client.get(URL))) == 301  # 500 by default
    assert len(ids(token_client.get(URL, {"page_size": 10}))) == 10


@pytest.fixture
def two_studies(voted_study):
    other = make_study()
    question = make_question(other)
    make_variant(question, kind="gender")
    foreign = make_vote(other.items.get(kind__isnull=True), human_pool(other), rater=make_rater(other))
    return voted_study, foreign


def test_votes_filter_by_study(two_studies, token_client):
    data, foreign = two_studies
    expected = sorted(v.pk for v in data.human_votes + data.bot_votes)
    assert ids(token_client.get(URL, {"study": data.study.slug})) == expected
    assert ids(token_client.get(URL, {"study": foreign.item.study.slug})) == [foreign.pk]


def test_votes_filter_by_judge_and_rater(two_studies, token_client):
    data, _ = two_studies
    assert ids(token_client.get(URL, {"judge": data.bot.pk})) == [v.pk for v in data.bot_votes]
    assert ids(token_client.get(URL, {"rater": data.rater.pk})) == [v.pk for v in data.human_votes]


@pytest.mark.parametrize("group", ["control", "gold", "reference", "gender"])
def test_votes_filter_by_group(two_studies, token_client, group):
    data, foreign = two_studies
    expected = [v.pk for v in Vote.objects.order_by("id") if v.item.group == group]
    assert ids(token_client.get(URL, {"group": group})) == expected
    if group in ("control", "gold", "reference"):
        assert expected


def test_votes_filter_by_time_received(voted_study, token_client):
    votes = voted_study.human_votes
    start = timezone.now() - timedelta(days=10)
    for day, vote in enumerate(votes):
        Vote.objects.filter(pk=vote.pk).update(received_at=start + timedelta(days=day))
    window = {
        "received_since": (start + timedelta(days=1)).isoformat(),
        "received_before": (start + timedelta(days=3)).isoformat(),
    }
    assert ids(token_client.get(URL, {"judge": voted_study.humans.pk, **window})) == [votes[1].pk, votes[2].pk]


def test_filters_combine(two_studies, token_client):
    data, _ = two_studies
    response = token_client.get(URL, {"study": data.study.slug, "judge": data.humans.pk, "group": "reference"})
    assert ids(response) == [v.pk for v in data.human_votes if v.item.kind_id]


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"study": "nope"}, "study", "No study with slug 'nope'."),
        ({"study": "not a slug!"}, "study", "letters, numbers, underscores or hyphens"),
        ({"judge": "abc"}, "judge", "A valid integer is required."),
        ({"judge": "0"}, "judge", "greater than or equal to 1"),
        ({"judge": "99999"}, "judge", "No judge with id 99999."),
        ({"judge": "9" * 30}, "judge", "less than or equal to"),
        ({"rater": "99999"}, "rater", "No rater with id 99999."),
        ({"group": "sarcasm"}, "group", "No group 'sarcasm'"),
        ({"received_since": "yesterday"}, "received_since", "Datetime has wrong format"),
        (
            {"received_since": "2024-02-01T00:00:00Z", "received_before": "2024-01-01T00:00:00Z"},
            "received_before",
            "later than",
        ),
        ({"cursor": "bm90IGEgY3Vyc29y"}, "cursor", "Invalid cursor"),
        ({"cursor": "%%%"}, "cursor", "Invalid cursor"),
        ({"cursor": base64.b64encode(b"p=abc").decode()}, "cursor", "Invalid cursor"),
        ({"cursor": base64.b64encode(b"p=99999999999999999999999").decode()}, "cursor", "Invalid cursor"),
    ],
)
def test_bad_filter_values_are_a_400_naming_the_parameter(voted_study, token_client, params, field, message):
    response = token_client.get(URL, params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == ["detail", field]
    assert message in body[field][0] and message in body["detail"]


def test_filters_of_other_lists_are_checked_too(voted_study, token_client):
    slug = voted_study.study.slug
    cases = [
        ("study-answers", {"review_status": "maybe"}, "review_status"),
        ("study-answers", {"original": "perhaps"}, "original"),
        ("study-items", {"group": "nope"}, "group"),
        ("study-raters", {"flagged": "2"}, "flagged"),
    ]
    for name, params, field in cases:
        response = token_client.get(reverse(f"api:{name}", args=[slug]), params)
        assert response.status_code == 400, (name, params)
        assert list(response.json()) == ["detail", field]
    response = token_client.get(reverse("api:judges"), {"kind": "robot", "study": "nope"})
    assert response.status_code == 400
    assert set(response.json()) == {"detail", "kind", "study"}
