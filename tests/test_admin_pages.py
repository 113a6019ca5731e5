"""Every admin page a researcher can reach renders: each registered model's list, search and
first object's page, with the demo study and some votes loaded."""

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.urls import reverse

from annotations.models import Study, Vote


@pytest.fixture
def loaded(db):
    call_command("load_demo", verbosity=0)
    call_command("create_demo_judges", verbosity=0)
    return Study.objects.get(slug="demo")


def test_every_admin_list_and_first_object_renders(staff_client, loaded):
    assert Vote.objects.exists()
    for model, model_admin in admin.site._registry.items():
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        listing = staff_client.get(reverse(f"{prefix}_changelist"))
        assert listing.status_code == 200, f"{model.__name__} list: {listing.status_code}"
        if model_admin.search_fields:
            assert staff_client.get(reverse(f"{prefix}_changelist"), {"q": "a"}).status_code == 200
        first = model_admin.get_queryset(listing.wsgi_request).first()
        if first is not None:
            page = staff_client.get(reverse(f"{prefix}_change", args=[first.pk]))
            assert page.status_code == 200, f"{model.__name__} #{first.pk}: {page.status_code}"


def test_the_vote_list_says_whether_each_human_vote_counted(staff_client, loaded):
    from tests.factories import human_pool, make_rater

    item = loaded.items.scored().first()
    rater = make_rater(loaded)
    Vote.objects.create(
        item=item,
        judge=human_pool(loaded),
        rater=rater,
        shown_first="a1",
        choice_shown="first",
        meta={"assignment": {"counted": False, "too_fast": True, "late": False}},
    )
    # The rater's own votes: the demo's simulated people fill more than a page of the list.
    page = staff_client.get(
        reverse("admin:annotations_vote_changelist"), {"judge__kind__exact": "human", "q": rater.participant_id}
    )
    assert b"too fast" in page.content


def test_the_study_list_offers_the_votes_download_through_the_dashboard(staff_client, loaded):
    response = staff_client.post(
        reverse("admin:annotations_study_changelist"), {"action": "export_votes_csv", "_selected_action": [loaded.pk]}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("analysis:export", args=["demo", "votes"])
    assert staff_client.get(response["Location"]).status_code == 200


def test_votes_can_be_neither_added_nor_deleted_in_the_admin(staff_client, loaded):
    vote = Vote.objects.first()
    assert staff_client.get(reverse("admin:annotations_vote_add")).status_code == 403
    assert (
        staff_client.post(reverse("admin:annotations_vote_delete", args=[vote.pk]), {"post": "yes"}).status_code == 403
    )
    assert Vote.objects.filter(pk=vote.pk).exists()


def test_the_study_form_refuses_more_votes_per_item_than_study_files_may_ask(staff_client, db):
    url = reverse("admin:annotations_study_add")
    form = staff_client.get(url).context["adminform"].form
    assert form.fields["votes_per_item"].max_value == 100
    response = staff_client.post(url, {"title": "Big", "slug": "big", "status": "draft", "votes_per_item": 2**40})
    assert response.status_code == 200
    assert "Ensure this value is less than or equal to 100." in response.content.decode()
    assert not Study.objects.filter(slug="big").exists()
