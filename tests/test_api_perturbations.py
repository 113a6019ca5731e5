"""Perturbations through the API: generate (rule-based in the request, model-based queued as
the admin queues it), list the variants with their checks, approve or reject them, all through
perturbations.services."""

import pytest
from django.urls import reverse

from annotations.models import Answer, ComparisonItem
from perturbations.models import AnswerRevision
from perturbations.services import perturbation_generate
from tests.factories import make_judge, make_question, make_study, make_variant, make_vote
from tests.test_perturb_model import A2, FE_OUTPUT, QUESTION, ScriptedServer, scripted_generator
from tests.test_perturb_services import A1
from tests.test_perturb_services import A2 as PLANT_A2

GENERATE = reverse("api:study-perturbations", args=["plants"])


@pytest.fixture
def plants(db):
    study = make_study(slug="plants")
    for _ in range(3):
        make_question(study, a1=A1, a2=PLANT_A2)
    return study


def generate(client, **body):
    return client.post(GENERATE, body, format="json")


def test_rule_based_generation_creates_pending_variants_and_reports_them(plants, token_client, api_token):
    items_before = ComparisonItem.objects.count()
    response = generate(token_client, kind="reference", seed=4)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert len(body["created"]) == 3 and body["skipped"] == [] and body["failed"] == []
    for variant in body["created"]:
        assert variant["review_status"] == "pending" and variant["kind"] == "reference"
        assert variant["external_id"].endswith("-a2-reference-r4") and variant["item"] is None
        assert variant["provenance"]["method"] == "rule"
        assert variant["provenance"]["created_by"] == api_token.user.username
        assert "ok" in variant["checks"]
    assert body["flagged"] == [v["id"] for v in body["created"] if not v["checks"]["ok"]]
    assert ComparisonItem.objects.count() == items_before
    # The same again: nothing new, every variant skipped.
    again = generate(token_client, kind="reference", seed=4)
    assert again.status_code == 200
    assert again.json()["created"] == [] and len(again.json()["skipped"]) == 3


def test_the_original_to_perturb_can_be_a1(plants, token_client):
    body = generate(token_client, kind="rich_content", seed=1, of="a1").json()
    assert {v["external_id"].rsplit("-rich_content", 1)[0][-3:] for v in body["created"]} == {"-a1"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"seed": 1}, "kind"),
        ({"kind": "no-such-kind", "seed": 1}, "kind"),
        ({"kind": "reference"}, "seed"),
        ({"kind": "reference", "seed": -1}, "seed"),
        ({"kind": "reference", "seed": 1, "method": "magic"}, "method"),
        ({"kind": "reference", "seed": 1, "of": "a3"}, "of"),
    ],
)
def test_a_bad_generate_request_is_a_400_naming_the_field(plants, token_client, body, field):
    response = token_client.post(GENERATE, body, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Answer.objects.variants().exists()


def test_what_the_generator_refuses_is_a_400_with_its_reason(plants, token_client):
    # factual_error has no rule generator: only a model can plant errors.
    response = generate(token_client, kind="factual_error", seed=1, method="rule")
    assert response.status_code == 400
    assert "no rule generator" in response.json()["detail"]


def test_model_based_generation_is_queued_and_the_worker_writes_the_variant(
    db, token_client, monkeypatch, django_capture_on_commit_callbacks
):
    study = make_study(slug="moon")
    make_question(study, text=QUESTION, a1="Tides come from the Moon's pull.", a2=A2)
    with ScriptedServer([FE_OUTPUT]) as server:
        generator = scripted_generator(server, monkeypatch)
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = token_client.post(
                reverse("api:study-perturbations", args=["moon"]),
                {"kind": "factual_error", "seed": 2, "method": "model", "generator": generator.judge.name},
                format="json",
            )
            assert response.status_code == 202
            assert response.json()["queued"] is True
            assert not Answer.objects.variants().exists()  # nothing until the worker ran
    assert callbacks and len(server.requests) == 1  # the task ran once, after the commit
    (variant,) = Answer.objects.variants()
    assert variant.review_status == Answer.Review.PENDING
    assert [e["error"] for e in variant.inserted_errors] == ["45 days", "magnetism"]
    listed = token_client.get(reverse("api:study-perturbations", args=["moon"])).json()["results"]
    assert [v["id"] for v in listed] == [variant.pk]


def test_the_list_shows_variants_with_checks_and_review_status_and_filters_them(plants, token_client):
    perturbation_generate(study=plants, kind="reference", seed=1)
    perturbation_generate(study=plants, kind="rich_content", seed=1)
    approved = Answer.objects.get(external_id__endswith="-reference-r1", question=plants.questions.first())
    # Every variant with a warning here (a rule's expected added length is only a note); one clean
    # and one never checked (no "ok" at all).
    Answer.objects.variants().update(checks={"ok": False, "warnings": ["content: 2 word(s) of the original lost"]})
    clean, unchecked = Answer.objects.variants().filter(kind__slug="rich_content").order_by("id")[:2]
    Answer.objects.filter(pk=clean.pk).update(checks={"ok": True, "warnings": []})
    Answer.objects.filter(pk=unchecked.pk).update(checks={})
    token_client.post(reverse("api:answer-review", args=[approved.pk]), {"decision": "approve"}, format="json")
    url = reverse("api:study-perturbations", args=["plants"])

    def rows(**params):
        response = token_client.get(url, params)
        assert response.status_code == 200, response.json()
        return response.json()["results"]

    everything = rows()
    assert len(everything) == 6 and all(not v["is_original"] for v in everything)
    assert {v["review_status"] for v in everything} == {"pending", "approved"}
    assert all("checks" in v and "provenance" in v for v in everything)
    assert len(rows(kind="rich_content")) == 3
    (only,) = rows(review_status="approved")
    assert only["id"] == approved.pk and only["item"] == ComparisonItem.objects.get(answer_a2=approved).pk
    flagged = [v["id"] for v in everything if not v["checks"].get("ok", True)]
    assert len(flagged) == 4
    assert [v["id"] for v in rows(flagged="true")] == flagged
    assert {v["id"] for v in rows(flagged="false")} == {clean.pk, unchecked.pk}
    for params, field in [({"review_status": "maybe"}, "review_status"), ({"flagged": "perhaps"}, "flagged")]:
        response = token_client.get(url, params)
        assert response.status_code == 400 and field in response.json()


def test_approving_makes_the_item_and_rejecting_removes_it(plants, token_client, api_token):
    result = perturbation_generate(study=plants, kind="reference", seed=1)
    variant = result.created[0]
    review = reverse("api:answer-review", args=[variant.pk])
    response = token_client.post(review, {"decision": "approve", "note": "reads well"}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    item = ComparisonItem.objects.get(answer_a2=variant)
    assert body["item"] == item.pk and body["answer"]["item"] == item.pk
    assert body["answer"]["review_status"] == "approved"
    revision = AnswerRevision.objects.get(answer=variant)
    assert revision.action == "approve" and revision.note == "reads well" and revision.user == api_token.user

    response = token_client.post(review, {"decision": "reject"}, format="json")
    assert response.status_code == 200
    assert response.json()["item"] is None and response.json()["answer"]["review_status"] == "rejected"
    assert not ComparisonItem.objects.filter(answer_a2=variant).exists()


def test_what_the_review_refuses_is_a_400_and_changes_nothing(plants, token_client):
    question = plants.questions.first()
    variant = make_variant(question, kind="reference")
    make_vote(ComparisonItem.objects.get(answer_a2=variant), make_judge())
    response = token_client.post(reverse("api:answer-review", args=[variant.pk]), {"decision": "reject"}, format="json")
    assert response.status_code == 400 and "already has 1 vote" in response.json()["detail"]
    assert ComparisonItem.objects.filter(answer_a2=variant).exists()
    original = question.answers.originals().first()
    response = token_client.post(
        reverse("api:answer-review", args=[original.pk]), {"decision": "approve"}, format="json"
    )
    assert response.status_code == 400 and "original answer" in response.json()["detail"]
    for body, field in [
        ({}, "decision"),
        ({"decision": "maybe"}, "decision"),
        ({"decision": "approve", "note": "x" * 2001}, "note"),
    ]:
        response = token_client.post(reverse("api:answer-review", args=[variant.pk]), body, format="json")
        assert response.status_code == 400 and field in response.json()
    assert not AnswerRevision.objects.exists()


def test_missing_studies_and_answers_are_404(db, token_client):
    assert token_client.get(reverse("api:study-perturbations", args=["nope"])).status_code == 404
    response = token_client.post(reverse("api:study-perturbations", args=["nope"]), {"kind": "reference", "seed": 1})
    assert response.status_code == 404
    for pk in (10**6, 2**70):
        response = token_client.post(reverse("api:answer-review", args=[pk]), {"decision": "approve"}, format="json")
        assert response.status_code == 404 and response.json()["detail"]


@pytest.mark.parametrize(
    ("persona", "status"), [("anon_client", 401), ("rater_session_client", 401), ("user_client", 403)]
)
def test_only_staff_may_list_generate_or_review(plants, rater, persona, status, request):
    client = request.getfixturevalue(persona)
    variant = perturbation_generate(study=plants, kind="reference", seed=1).created[0]
    assert client.get(GENERATE).status_code == status
    body = {"kind": "rich_content", "seed": 1}
    assert client.post(GENERATE, body, content_type="application/json").status_code == status
    review = reverse("api:answer-review", args=[variant.pk])
    assert client.post(review, {"decision": "approve"}, content_type="application/json").status_code == status
    variant.refresh_from_db()
    assert variant.review_status == Answer.Review.PENDING
    assert Answer.objects.variants().count() == 3


def test_an_unknown_generator_is_a_400_naming_the_known_ones(db, token_client):
    make_study(slug="moon2")
    response = token_client.post(
        reverse("api:study-perturbations", args=["moon2"]),
        {"kind": "factual_error", "seed": 1, "method": "model", "generator": "nobody"},
        format="json",
    )
    assert response.status_code == 400
    assert "no LLM judge configuration named 'nobody'" in str(response.json())
