"""What the read endpoints show, and that a list costs the same few queries however long it is."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotations.models import Answer, Vote
from tests.factories import human_pool, make_judge, make_question, make_rater, make_study, make_variant, make_vote


def get(client, name, *args, **params):
    response = client.get(reverse(f"api:{name}", args=args), params)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_study_is_found_by_its_slug(voted_study, token_client):
    body = get(token_client, "study-detail", voted_study.study.slug)
    assert body["slug"] == voted_study.study.slug
    assert body["votes_per_item"] == 2
    assert body["status"] == "collecting"


def test_the_studies_list_holds_every_study(voted_study, token_client):
    body = get(token_client, "studies")
    assert [s["slug"] for s in body["results"]] == [voted_study.study.slug]
    assert body["next"] is None


def test_questions_are_listed_per_study_with_attention_checks_marked(voted_study, token_client):
    body = get(token_client, "study-questions", voted_study.study.slug)
    gold = {q["external_id"]: q["is_gold"] for q in body["results"]}
    assert gold == {**{q.external_id: False for q in voted_study.questions}, "gold-1": True}


def test_an_answer_shows_provenance_checks_review_and_lengths(voted_study, token_client):
    variant = voted_study.variant
    body = get(token_client, "answer-detail", variant.pk)
    assert body["kind"] == "reference"
    assert body["derived_from"] == variant.derived_from_id
    assert body["is_original"] is False
    assert body["provenance"] == {"method": "hand"}
    assert body["checks"] == {"length_ratio": 1.1}
    assert body["review_status"] == "approved"
    assert variant.len_words > 0
    assert body["lengths"] == {"words": variant.len_words, "chars": variant.len_chars, "bpe": variant.len_bpe}


def test_answers_filter_by_review_status_kind_and_original(voted_study, token_client):
    slug = voted_study.study.slug
    pending = make_variant(
        voted_study.questions[1], kind="factual_error", review_status=Answer.Review.PENDING, item=False
    )
    assert [a["id"] for a in get(token_client, "study-answers", slug, review_status="pending")["results"]] == [
        pending.pk
    ]
    assert [a["id"] for a in get(token_client, "study-answers", slug, kind="reference")["results"]] == [
        voted_study.variant.pk
    ]
    originals = get(token_client, "study-answers", slug, original="true", page_size=100)["results"]
    assert originals and all(a["is_original"] for a in originals)
    variants = get(token_client, "study-answers", slug, original="false")["results"]
    assert {a["id"] for a in variants} == {voted_study.variant.pk, pending.pk}


def test_items_carry_their_group_and_filter_by_it(voted_study, token_client):
    slug = voted_study.study.slug
    groups = sorted(i["group"] for i in get(token_client, "study-items", slug)["results"])
    assert groups == ["control", "control", "control", "gold", "reference"]
    only = get(token_client, "study-items", slug, group="reference")["results"]
    assert [i["answer_a2"] for i in only] == [voted_study.variant.pk]
    assert len(get(token_client, "study-items", slug, group="gold")["results"]) == 1


def test_raters_are_pseudonymous_with_gold_counts_and_vote_counts(voted_study, token_client):
    rater = voted_study.rater
    rater.source_meta = {"PROLIFIC_PID": "someone", "SESSION_ID": "s"}
    rater.gold_seen, rater.gold_correct = 4, 3
    rater.save()
    body = get(token_client, "study-raters", voted_study.study.slug)["results"]
    assert len(body) == 1
    assert body[0]["pseudonym"] == f"R{rater.pk}"
    assert rater.participant_id not in str(body)
    assert (body[0]["gold_seen"], body[0]["gold_correct"], body[0]["n_votes"]) == (4, 3, len(voted_study.items))
    assert "source_meta" not in body[0]
    assert "someone" not in str(body)


def test_raters_filter_by_flag(voted_study, token_client):
    flagged = make_rater(voted_study.study, flagged=True, flag_reason="too fast")
    body = get(token_client, "study-raters", voted_study.study.slug, flagged="true")["results"]
    assert [r["id"] for r in body] == [flagged.pk]


def test_judges_of_a_study_include_the_global_ones(voted_study, token_client):
    other = make_study()
    make_judge(study=other, kind="imported", name="theirs")
    names = {j["name"] for j in get(token_client, "judges", study=voted_study.study.slug)["results"]}
    assert names == {voted_study.humans.name, voted_study.bot.name}
    humans = get(token_client, "judges", kind="human")["results"]
    assert [j["study"] for j in humans] == [voted_study.study.slug]


def test_a_vote_shows_its_study_group_and_rater(voted_study, token_client):
    vote = voted_study.human_votes[0]
    body = get(token_client, "vote-detail", vote.pk)
    assert body["study"] == voted_study.study.slug
    assert body["group"] == "control"
    assert body["pseudonym"] == f"R{voted_study.rater.pk}"
    assert (body["shown_first"], body["choice_shown"], body["choice"]) == ("a1", "first", "a1")
    assert body["labels_swapped"] is False
    Vote.objects.filter(pk=voted_study.bot_votes[0].pk).update(labels_swapped=True)
    bot_vote = get(token_client, "vote-detail", voted_study.bot_votes[0].pk)
    assert (bot_vote["rater"], bot_vote["pseudonym"], bot_vote["choice"]) == (None, None, "a1")
    assert bot_vote["labels_swapped"] is True


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/studies/no-such-study/",
        "/api/v1/studies/no-such-study/export/",
        "/api/v1/studies/no-such-study/items/",
        "/api/v1/answers/999999/",
        "/api/v1/votes/999999/",
        "/api/v1/judges/9223372036854775808/",
        "/api/v1/questions/99999999999999999999999/",
    ],
)
def test_missing_objects_are_a_404_with_a_detail(db, token_client, url):
    response = token_client.get(url)
    assert response.status_code == 404
    assert list(response.json()) == ["detail"]


def test_writes_to_read_only_endpoints_are_refused_with_405(voted_study, token_client):
    response = token_client.delete(reverse("api:vote-detail", args=[voted_study.human_votes[0].pk]))
    assert response.status_code == 405
    assert response.json() == {"detail": 'Method "DELETE" not allowed.'}


def list_urls(study) -> list[str]:
    slug = study.slug
    return [
        reverse("api:studies"),
        reverse("api:study-questions", args=[slug]),
        reverse("api:study-answers", args=[slug]),
        reverse("api:study-items", args=[slug]),
        reverse("api:study-raters", args=[slug]),
        reverse("api:judges"),
        reverse("api:votes"),
    ]


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_lists_cost_the_same_queries_however_many_rows(voted_study, token_client):
    small = {url: count_queries(token_client, url) for url in list_urls(voted_study.study)}
    study = voted_study.study
    for _ in range(5):
        question = make_question(study)
        make_variant(question, kind="rich_content")
    for _ in range(4):
        rater = make_rater(study)
        for item in study.items.all():
            make_vote(item, human_pool(study), rater=rater)
    make_judge(name="another")
    large = {url: count_queries(token_client, url) for url in list_urls(study)}
    assert large == small


@pytest.mark.parametrize(
    ("name", "queries"),
    [
        # token + user, study, the page
        ("study-questions", 3),
        ("study-answers", 3),
        ("study-items", 3),
        ("study-raters", 3),
    ],
)
def test_a_study_list_takes_three_queries(voted_study, token_client, django_assert_num_queries, name, queries):
    url = reverse(f"api:{name}", args=[voted_study.study.slug])
    with django_assert_num_queries(queries):
        token_client.get(url)


def test_the_vote_list_takes_two_queries(voted_study, token_client, django_assert_num_queries):
    # token + user, the page (study, group and rater come as columns of the same query)
    with django_assert_num_queries(2):
        token_client.get(reverse("api:votes"))
