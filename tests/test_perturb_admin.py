"""The admin review and generate pages: access for each persona, decisions one by one and in bulk,
editing with history, generation from the study list, and escaping of everything shown.
"""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from annotations.models import Answer, ComparisonItem
from perturbations.models import AnswerRevision
from perturbations.services import perturbation_generate, variant_checks
from tests.factories import make_question, make_staff, make_study, make_variant

A2 = "Water boils at 100 degrees Celsius at sea level. At higher altitudes it boils at a lower temperature."


@pytest.fixture
def study(db):
    study = make_study(slug="boil", title="Boiling")
    for _ in range(2):
        make_question(study, a1="It boils at 100 °C.", a2=A2)
    return study


@pytest.fixture
def variants(study):
    return perturbation_generate(study=study, kind="reference", seed=1).created


def review_url(study):
    return reverse("admin:perturbations_review", args=[study.pk])


def plain_staff_client(*perms):
    user = make_staff(is_superuser=False)
    user.user_permissions.add(*Permission.objects.filter(codename__in=perms))
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_visitors_are_sent_to_the_login(anon_client, study):
    response = anon_client.get(review_url(study))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_without_permission_cannot_see_or_decide(study, variants):
    client = plain_staff_client()
    assert client.get(review_url(study)).status_code == 403
    assert client.post(review_url(study), {"single": f"approve:{variants[0].pk}"}).status_code == 403


def test_staff_who_may_only_view_see_no_buttons_and_cannot_post(study, variants):
    client = plain_staff_client("view_variant")
    page = client.get(review_url(study)).content.decode()
    assert variants[0].external_id in page and "Approve ticked" not in page
    assert client.post(review_url(study), {"single": f"approve:{variants[0].pk}"}).status_code == 403
    assert not ComparisonItem.objects.filter(answer_a2=variants[0]).exists()


def test_the_review_page_shows_both_sides_the_diff_and_the_checks(staff_client, study, variants):
    response = staff_client.get(review_url(study))
    page = response.content.decode()
    assert response.status_code == 200
    assert page.count('class="pt-card') == 2
    assert "<strong>References</strong>" in page  # the variant rendered as markdown
    assert '<ins class="pt-ins">' in page  # the diff marks the added references
    assert "words added" not in page or "0 words added" in page
    assert "length bound 1.3×" in page
    assert '<td class="pt-over">' in page  # two short sentences plus a reference list: over the bound


def test_a_variant_imported_without_checks_is_checked_for_the_review_page(staff_client, study, variants):
    over = staff_client.get(review_url(study)).content.decode().count('<td class="pt-over">')
    assert over >= 2
    Answer.objects.filter(pk__in=[v.pk for v in variants]).update(checks={})  # as a study file import leaves them
    page = staff_client.get(review_url(study)).content.decode()
    assert page.count('<td class="pt-over">') == over  # the length table is filled as for generated variants
    assert (
        not Answer.objects.filter(pk__in=[v.pk for v in variants]).exclude(checks={}).exists()
    )  # a GET writes nothing


def test_the_review_page_filters_by_status_and_warnings(staff_client, study, variants):
    staff_client.post(review_url(study), {"single": f"approve:{variants[0].pk}"})
    page = staff_client.get(review_url(study), {"status": "approved"}).content.decode()
    assert variants[0].external_id in page and variants[1].external_id not in page
    assert staff_client.get(review_url(study), {"status": "bogus"}).status_code == 200  # invalid filter: ignored


def test_one_variant_is_approved_with_its_own_button(staff_client, study, variants):
    response = staff_client.post(review_url(study), {"single": f"approve:{variants[0].pk}"})
    assert response.status_code == 302
    item = ComparisonItem.objects.get(answer_a2=variants[0])
    assert item.kind.slug == "reference" and item.answer_a1.external_id.endswith("-a1")
    assert Answer.objects.get(pk=variants[1].pk).review_status == "pending"


def test_ticked_variants_are_rejected_in_bulk_with_a_note(staff_client, study, variants):
    staff_client.post(review_url(study), {"bulk": "reject", "selected": [v.pk for v in variants], "note": "too long"})
    assert set(Answer.objects.filter(pk__in=[v.pk for v in variants]).values_list("review_status", flat=True)) == {
        "rejected"
    }
    assert set(AnswerRevision.objects.values_list("note", flat=True)) == {"too long"}


def test_a_bulk_decision_without_ticks_or_on_another_studys_variant_does_nothing(staff_client, study, variants):
    other = make_study()
    make_question(other, a2=A2)
    foreign = perturbation_generate(study=other, kind="reference", seed=1).created[0]
    response = staff_client.post(review_url(study), {"bulk": "approve"}, follow=True)
    assert response.content.decode().count("Tick at least one variant") == 1
    staff_client.post(review_url(study), {"single": f"approve:{foreign.pk}"})
    assert not ComparisonItem.objects.filter(answer_a2=foreign).exists()


def test_editing_saves_a_revision_and_shows_the_history(staff_client, study, variants):
    url = reverse("admin:perturbations_edit", args=[study.pk, variants[0].pk])
    assert staff_client.get(url).status_code == 200
    new_text = variants[0].text.replace("Water boils", "Pure water boils")
    response = staff_client.post(url, {"text": new_text, "note": "be precise"})
    assert response.status_code == 302
    variant = Answer.objects.get(pk=variants[0].pk)
    assert variant.text == new_text and "Pure" in variant.checks["preservation"]["added"]
    history = staff_client.get(url).content.decode()
    assert "be precise" in history and '<del class="pt-del">Water</del> <ins class="pt-ins">Pure water</ins>' in history


def test_generate_is_an_action_on_the_study_list_and_a_form(staff_client, study):
    changelist = reverse("admin:perturbations_perturbationstudy_changelist")
    response = staff_client.post(changelist, {"action": "generate_perturbations", "_selected_action": [study.pk]})
    assert response.status_code == 302
    form_url = response["Location"]
    assert staff_client.get(form_url).status_code == 200
    response = staff_client.post(form_url, {"kind": "rich_content", "seed": 2, "method": "rule", "of": "a2"})
    assert response["Location"] == review_url(study)
    assert Answer.objects.filter(kind__slug="rich_content", review_status="pending").count() == 2
    assert not ComparisonItem.objects.filter(kind__slug="rich_content").exists()
    page = staff_client.get(changelist).content.decode()
    assert "Review variants" in page


def test_generating_a_kind_without_a_rule_reports_the_reason(staff_client, study):
    url = reverse("admin:perturbations_generate") + f"?ids={study.pk}"
    response = staff_client.post(url, {"kind": "factual_error", "seed": 1, "method": "rule", "of": "a2"}, follow=True)
    assert "has no rule generator" in response.content.decode()


def test_answer_text_is_escaped_in_the_page_and_the_diff(staff_client, study):
    question = make_question(study, a2="Plain <b>answer</b> here.")
    perturbation_generate(study=study, kind="rich_content", seed=1, questions=[question])
    Answer.objects.filter(question=question, derived_from__isnull=False).update(
        text="Plain <script>alert(1)</script> answer here."
    )
    page = staff_client.get(review_url(study)).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # escaped inside the diff


def test_the_variant_list_approves_in_bulk_with_an_admin_action(staff_client, study, variants):
    url = reverse("admin:perturbations_variant_changelist")
    assert staff_client.get(url).status_code == 200
    staff_client.post(url, {"action": "approve", "_selected_action": [v.pk for v in variants]})
    assert ComparisonItem.objects.filter(kind__slug="reference").count() == 2


def test_model_generation_is_queued_and_runs_with_the_chosen_generator(
    staff_client, study, monkeypatch, django_capture_on_commit_callbacks
):
    from judges.services import DEMO_JUDGE_NAME
    from tests.test_perturb_model import ScriptedServer, scripted_generator

    reply = (
        "```answer\n"
        + A2.replace("100 degrees", "90 degrees")
        + "\n```\n```errors\n"
        + ('[{"original": "100 degrees", "error": "90 degrees", "explanation": "Water boils at 100 °C."}]\n```')
    )
    url = reverse("admin:perturbations_generate") + f"?ids={study.pk}"
    with ScriptedServer([reply, reply]) as server:
        config = scripted_generator(server, monkeypatch)
        form = staff_client.get(url).context["form"]
        # The local demo judge is offered and chosen by default; the other configurations are listed.
        choices = [label for _, label in form.fields["generator"].choices]
        assert choices == ["Scripted rewriter", DEMO_JUDGE_NAME]  # by name
        assert form["generator"].value() == form.fields["generator"].queryset.get(judge__name=DEMO_JUDGE_NAME).pk
        with django_capture_on_commit_callbacks(execute=True):
            response = staff_client.post(
                url, {"kind": "factual_error", "seed": 1, "method": "model", "of": "a2", "generator": config.pk}
            )
    assert response.status_code == 302
    assert len(server.requests) == 2
    variants = Answer.objects.filter(kind__slug="factual_error", review_status="pending")
    assert variants.count() == 2
    assert all(v.inserted_errors[0]["error"] == "90 degrees" for v in variants)
    assert {v.provenance["steps"][0]["model"]["judge"] for v in variants} == {"Scripted rewriter"}


def test_model_generation_needs_a_generator(staff_client, study):
    url = reverse("admin:perturbations_generate") + f"?ids={study.pk}"
    response = staff_client.post(url, {"kind": "factual_error", "seed": 1, "method": "model", "of": "a2"})
    assert response.status_code == 200
    assert "choose the LLM judge configuration whose model generates" in response.content.decode()
    assert not Answer.objects.filter(kind__slug="factual_error").exists()


def test_the_review_page_says_what_an_adding_kind_inserted_and_that_its_length_is_the_point(staff_client, study):
    perturbation_generate(study=study, kind="verbosity", seed=1)
    page = " ".join(staff_client.get(review_url(study)).content.decode().split())
    assert page.count('class="pt-card') == 2
    assert "0 words added, 0 lost, once the 3 declared insertions are taken out." in page
    assert "the added length is what this kind does, so keep it" in page
    assert "shorten it" not in page
    # An expected length is a note: the filter "with warnings only" counts real warnings only.
    assert 'class="pt-notes"' in page and 'class="pt-warnings"' not in page
    flagged = " ".join(staff_client.get(review_url(study), {"flagged": "on"}).content.decode().split())
    assert flagged.count('class="pt-card') == 0


def test_the_review_page_shows_whether_a_tone_rewrite_kept_the_facts(staff_client, study):
    first, second = study.questions.order_by("external_id")
    kept = "Sadly, water boils at 100 degrees Celsius at sea level, and lower up high."
    dropped = "Sadly, water just boils. At higher altitudes it boils at a lower temperature."
    for question, text in ((first, kept), (second, dropped)):
        variant = make_variant(question, kind="sentiment", text=text, item=False)
        variant.checks = variant_checks(answer=variant)
        variant.save(update_fields=["checks"])
    page = " ".join(staff_client.get(review_url(study)).content.decode().split())
    assert "every number and name of the original is there" in page
    assert 'missing or fewer: <del class="pt-del">100</del>' in page


@pytest.mark.django_db(transaction=True)
def test_variants_checked_before_keep_their_expected_length_as_a_note_after_migration():
    from tests.test_migrations import _migrate_across

    study = make_study()
    for _ in range(2):
        make_question(study, a1="Water boils at 100 degrees.", a2="Ice melts at 0 degrees.")
    perturbation_generate(study=study, kind="verbosity", seed=1)
    said = "length: the variant is 2.0× the original in words (the study's bound is 1.3×): the added length is what this kind does, so keep it; the length-controlled (LC) estimate controls for it"
    lost = "content: 2 word(s) of the original lost"
    first, second = Answer.objects.variants().order_by("id")
    Answer.objects.filter(pk=first.pk).update(checks={"ok": False, "warnings": [said]})
    Answer.objects.filter(pk=second.pk).update(checks={"ok": False, "warnings": [said, lost]})
    _migrate_across("0030_study_data_version", "0031_study_defaults_and_inherited_better_answers")
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.checks == {"ok": True, "warnings": [], "notes": [said]}
    assert second.checks == {"ok": False, "warnings": [lost], "notes": [said]}
