"""Generating variants without dead ends: a study that already has votes says so before anything
is generated and offers a new group that starts from zero votes; every failure is on the review
page with the model's raw output; factual errors ask for a model that can write them; length
warnings say what to do."""

import pytest
from django.urls import reverse

from annotations.models import Answer, ComparisonItem, PerturbationKind
from judges.services import llm_judge_demo_create
from perturbations.models import GenerationReport
from perturbations.services import answer_review, perturbation_generate
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant, make_vote
from tests.test_perturb_model import FE_OUTPUT, ScriptedServer, scripted_generator


@pytest.fixture
def study(db):
    study = make_study(title="Tides", slug="tides")
    for n in range(3):
        make_question(study, external_id=f"t{n}", a2=f"The Moon's gravity pulls the oceans, case {n}.")
    return study


def vote_on(item, n: int) -> None:
    pool = human_pool(item.study)
    for i in range(n):
        make_vote(item, pool, rater=make_rater(item.study, participant_id=f"r{item.pk}-{i}"))


def generate_url(study) -> str:
    return reverse("admin:perturbations_generate") + f"?ids={study.pk}"


def review_url(study) -> str:
    return reverse("admin:perturbations_review", args=[study.pk])


@pytest.fixture
def voted_reference(study):
    """Questions t0 and t1 have a reference item with votes (3 and 2); t2 has none."""
    for qid, n in (("t0", 3), ("t1", 2)):
        variant = make_variant(study.questions.get(external_id=qid), kind="reference")
        vote_on(ComparisonItem.objects.get(answer_a2=variant), n)
    return study


def test_the_form_says_the_study_has_votes_before_anything_is_generated(staff_client, voted_reference):
    html = staff_client.get(generate_url(voted_reference)).content.decode()
    assert "Tides already has 5 votes" in html
    assert "<td><code>reference</code></td><td>2 of 3</td><td>5</td>" in html
    assert "As a new group" in html
    assert not Answer.objects.filter(review_status="pending").exists()


def test_a_study_without_votes_gets_no_notice(staff_client, study):
    assert "already has" not in staff_client.get(generate_url(study)).content.decode()


def test_questions_whose_item_has_votes_are_left_out_and_the_others_get_variants(staff_client, voted_reference):
    response = staff_client.post(
        generate_url(voted_reference), {"kind": "reference", "seed": 7, "method": "rule", "of": "a2"}, follow=True
    )
    made = Answer.objects.filter(review_status="pending")
    assert [a.question.external_id for a in made] == ["t2"]
    assert "left out 2 whose item already has votes" in response.content.decode()
    report = GenerationReport.objects.get()
    assert [b["question"] for b in report.blocked] == ["t0", "t1"]
    assert "already has 3 vote(s)" in report.blocked[0]["reason"]
    # What was made can be approved: no dead end.
    answer_review(answer=made.get(), decision="approve")


def test_when_every_question_is_voted_the_form_refuses_and_offers_a_new_group(staff_client, voted_reference):
    t2 = voted_reference.questions.get(external_id="t2")
    vote_on(ComparisonItem.objects.get(answer_a2=make_variant(t2, kind="reference")), 1)
    response = staff_client.post(
        generate_url(voted_reference), {"kind": "reference", "seed": 7, "method": "rule", "of": "a2"}
    )
    assert response.status_code == 200
    error = response.context["form"].errors["kind"][0]
    assert "every question of Tides already has a reference item with votes" in error
    assert 'Tick "As a new group"' in error
    assert not Answer.objects.filter(review_status="pending").exists()


def test_a_new_group_makes_items_that_start_from_zero_votes_beside_the_voted_ones(staff_client, voted_reference):
    voted_items = set(ComparisonItem.objects.filter(kind__slug="reference").values_list("pk", "answer_a2"))
    staff_client.post(
        generate_url(voted_reference), {"kind": "reference", "seed": 7, "method": "rule", "of": "a2", "new_group": "on"}
    )
    group = PerturbationKind.objects.get(study=voted_reference)
    assert (group.slug, group.semantics, group.steps) == ("reference-tides", "non_semantic", ["reference"])
    made = Answer.objects.filter(review_status="pending", kind=group)
    assert sorted(a.question.external_id for a in made) == ["t0", "t1", "t2"]
    for variant in made:
        item = answer_review(answer=variant, decision="approve")
        assert item.kind == group and item.votes.count() == 0
    assert set(ComparisonItem.objects.filter(kind__slug="reference").values_list("pk", "answer_a2")) == voted_items
    # A second new group of the same kind reuses it rather than multiplying kinds.
    staff_client.post(
        generate_url(voted_reference), {"kind": "reference", "seed": 8, "method": "rule", "of": "a2", "new_group": "on"}
    )
    assert PerturbationKind.objects.filter(study=voted_reference).count() == 1


def test_every_model_failure_is_on_the_review_page_with_its_raw_output(
    staff_client, study, monkeypatch, django_capture_on_commit_callbacks
):
    replies = ["I would rather not change this answer.", "```answer\n```", FE_OUTPUT.replace("```errors", "```notes")]
    with ScriptedServer(replies) as server:
        config = scripted_generator(server, monkeypatch)
        with django_capture_on_commit_callbacks(execute=True):
            staff_client.post(
                generate_url(study),
                {"kind": "factual_error", "seed": 1, "method": "model", "of": "a2", "generator": config.pk},
            )
    assert not Answer.objects.filter(derived_from__isnull=False).exists()
    page = staff_client.get(review_url(study))
    html = page.content.decode()
    assert "failed for every question it tried (3 of 3)" in html
    assert "no ```answer block in the model output" in html
    assert "I would rather not change this answer." in html  # the raw output itself
    assert "the ```answer block is empty" in html
    assert "no ```errors block listing the inserted errors" in html
    assert 'tabindex="0"' in html  # the scrollable raw output is reachable by keyboard


def test_a_partial_failure_is_listed_without_the_every_question_banner(staff_client, study, monkeypatch):
    with ScriptedServer([FE_OUTPUT, "no blocks at all", FE_OUTPUT]) as server:
        result = perturbation_generate(
            study=study, kind="factual_error", seed=3, method="model", generator=scripted_generator(server, monkeypatch)
        )
    assert len(result.created) == 2 and [q for q, _ in result.failed] == ["t1"]
    html = staff_client.get(review_url(study)).content.decode()
    assert "failed for every question" not in html
    assert "<strong>t1</strong>: no ```answer block" in html and "no blocks at all" in html


def test_the_form_says_which_models_can_write_factual_errors_and_refuses_the_local_one(
    staff_client, study, monkeypatch
):
    local = llm_judge_demo_create()
    with ScriptedServer([]) as server:
        remote = scripted_generator(server, monkeypatch)
        form = staff_client.get(generate_url(study)).context["form"]
        help_text = form.fields["generator"].help_text
        assert "need a model behind an API: Scripted rewriter." in help_text
        assert "The local SmolLM2 model cannot write them." in help_text
        response = staff_client.post(
            generate_url(study),
            {"kind": "factual_error", "seed": 1, "method": "model", "of": "a2", "generator": local.pk},
        )
        assert "cannot write factual_error variants" in response.context["form"].errors["generator"][0]
        assert not server.requests
        # The same local model may still rewrite kinds without a list of errors.
        response = staff_client.post(
            generate_url(study), {"kind": "reference", "seed": 1, "method": "model", "of": "a2", "generator": local.pk}
        )
        assert response.status_code == 302
        assert remote.pk != local.pk


def test_a_length_warning_says_what_to_do(study):
    from perturbations.services import variant_checks

    question = study.questions.get(external_id="t0")
    tripled = question.answers.get(external_id="t0-a2").text * 3
    variant = make_variant(question, kind="factual_error", item=False, text=tripled)
    (warning, *_) = variant_checks(answer=variant)["warnings"]
    assert warning.endswith("shorten it, or accept it and rely on the length-controlled estimate")
    # Where the added length is the perturbation itself, the warning does not ask for it to go.
    # It is a note then, not a warning: the "with warnings only" filter leaves it out.
    variant.kind = PerturbationKind.objects.get(slug="reference")
    checks = variant_checks(answer=variant)
    (note,) = checks["notes"]
    assert "shorten" not in note and not any(w.startswith("length:") for w in checks["warnings"])
    assert note.endswith("is what this kind does, so keep it; the length-controlled (LC) estimate controls for it")
