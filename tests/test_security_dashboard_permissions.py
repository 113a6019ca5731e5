"""The dashboard, its CSV exports, the payment file and the admin's vote import follow Django's
model permissions as the API does (analysis.exports' *_PERMISSIONS): each download needs the
view permission of what it shows; the payment file, with platform participant ids, needs to view
raters; importing votes needs to add votes, and to add studies when it makes one."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from tests.factories import human_pool, make_question, make_rater, make_staff_with, make_study, make_vote
from tests.test_analysis_import import GOOD_ROWS, write_csv

pytestmark = pytest.mark.django_db


def client_with(*perms: str) -> Client:
    client = Client()
    client.force_login(make_staff_with(*perms))
    return client


@pytest.fixture
def study():
    study = make_study(slug="perm")
    make_question(study)
    make_vote(study.items.first(), human_pool(study), rater=make_rater(study, participant_id="PLATFORM-ID-7"))
    return study


def pages(slug: str) -> dict[str, str]:
    return {
        "dashboard": reverse("analysis:study", args=[slug]),
        "votes.csv": reverse("analysis:export", args=[slug, "votes"]),
        "items.csv": reverse("analysis:export", args=[slug, "items"]),
        "metrics.csv": reverse("analysis:export", args=[slug, "metrics"]),
        "raters.csv": reverse("analysis:export", args=[slug, "raters"]),
        "rater monitor": reverse("analysis:raters", args=[slug]),
        "payment": reverse("analysis:payment", args=[slug]),
        "payment paste": reverse("analysis:payment", args=[slug]) + "?paste=approve",
        "figure": reverse("analysis:plot", args=[slug, "forest", "csv"]),
    }


def test_who_reads_votes_but_not_raters_gets_the_results_but_not_the_participant_ids(study):
    client = client_with("annotations.view_study", "annotations.view_vote")
    status = {name: client.get(url).status_code for name, url in pages(study.slug).items()}
    assert status == {
        "dashboard": 200,
        "votes.csv": 200,
        "items.csv": 403,  # item preferences: items too
        "metrics.csv": 200,
        "raters.csv": 403,
        "rater monitor": 403,
        "payment": 403,
        "payment paste": 403,
        "figure": 200,
    }


def test_the_payment_file_and_the_rater_monitor_need_to_view_raters(study):
    client = client_with("annotations.view_rater")
    for name in ("payment", "payment paste", "rater monitor", "raters.csv"):
        response = client.get(pages(study.slug)[name])
        assert response.status_code == 200, name
    assert b"PLATFORM-ID-7" in client.get(pages(study.slug)["payment"]).getvalue()
    assert client.get(pages(study.slug)["dashboard"]).status_code == 403


def test_importing_votes_in_the_admin_needs_to_add_votes_and_to_add_a_study_it_makes(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    url = reverse("vote_imports:votes-import")

    def post(client):
        file = SimpleUploadedFile("votes.csv", write_csv(tmp_path / "votes.csv", GOOD_ROWS).read_bytes())
        return client.post(url, {"file": file, "format": "csv", "study": "made-here", "create": "on"})

    assert client_with("annotations.view_vote").get(url).status_code == 403
    votes_only = client_with("annotations.add_vote")
    assert votes_only.get(url).status_code == 200
    assert post(votes_only).status_code == 403
    assert post(client_with("annotations.add_vote", "annotations.add_study")).status_code == 302


def test_the_pages_link_only_to_what_the_user_may_open(study):
    # A staff member who may read the results but not raters, runs or variants was shown the
    # rater monitor, "Start a judge run", "Generate perturbations" and "Review perturbations",
    # each a 403 once followed.
    monitor = reverse("analysis:raters", args=[study.slug])
    start_run = reverse("admin:judges_judgerun_add")
    generate = reverse("admin:perturbations_generate")
    review = reverse("admin:perturbations_review", args=[study.pk])
    dashboard = reverse("analysis:study", args=[study.slug])
    study_page = reverse("admin:annotations_study_change", args=[study.pk])

    reader = client_with("annotations.view_study", "annotations.view_vote")
    for url in (dashboard, reverse("analysis:power", args=[study.slug])):
        page = reader.get(url).content.decode()
        assert f'href="{monitor}"' not in page and f'href="{start_run}?' not in page
    page = reader.get(study_page).content.decode()
    assert f'href="{dashboard}"' in page and generate not in page and review not in page
    assert reader.get(monitor).status_code == reader.get(start_run).status_code == reader.get(review).status_code == 403

    lead = client_with(
        "annotations.view_study",
        "annotations.view_vote",
        "annotations.view_rater",
        "judges.add_judgerun",
        "perturbations.change_variant",
    )
    page = lead.get(dashboard).content.decode()
    assert f'href="{monitor}"' in page and f'href="{start_run}?study={study.pk}"' in page
    page = lead.get(study_page).content.decode()
    assert f'href="{generate}?ids={study.pk}"' in page and f'href="{review}"' in page
    assert lead.get(monitor).status_code == lead.get(start_run).status_code == lead.get(review).status_code == 200
