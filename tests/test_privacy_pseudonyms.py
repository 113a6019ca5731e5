"""Platform participant ids appear in the payment file (and the admin's own rater pages) only:
every API response, CSV export, figure's CSV and dashboard page names raters by pseudonym."""

import pytest
from django.urls import reverse

from analysis import exports, plots
from annotations.models import Rater

PID = "PROLIFIC5f3a9c0d1e2b"


@pytest.fixture
def prolific_study(voted_study):
    Rater.objects.filter(pk=voted_study.rater.pk).update(
        participant_id=PID, source="prolific", source_meta={"PROLIFIC_PID": PID, "SESSION_ID": "sess-1"}
    )
    voted_study.rater.refresh_from_db()
    return voted_study


def body_of(response) -> str:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def api_urls(v) -> list[str]:
    slug, rater, vote = v.study.slug, v.rater.pk, v.human_votes[0].pk
    names = [
        ("studies", ()),
        ("study-detail", (slug,)),
        ("study-export", (slug,)),
        ("study-questions", (slug,)),
        ("study-answers", (slug,)),
        ("study-items", (slug,)),
        ("study-raters", (slug,)),
        ("rater-detail", (rater,)),
        ("judges", ()),
        ("votes", ()),
        ("vote-detail", (vote,)),
        ("study-metrics", (slug,)),
        ("study-export-votes", (slug,)),
        ("study-export-items", (slug,)),
        ("study-export-metrics", (slug,)),
        ("study-perturbations", (slug,)),
    ]
    return [reverse(f"api:{name}", args=args) for name, args in names]


def test_no_api_response_carries_a_participant_id(prolific_study, token_client):
    for url in api_urls(prolific_study):
        response = token_client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        assert PID not in body_of(response), url


def test_raters_and_votes_in_the_api_carry_the_pseudonym(prolific_study, token_client):
    pseudonym = f"R{prolific_study.rater.pk}"
    raters = token_client.get(reverse("api:study-raters", args=[prolific_study.study.slug])).json()["results"]
    assert [r["pseudonym"] for r in raters] == [pseudonym]
    assert "participant_id" not in raters[0]
    vote = token_client.get(reverse("api:vote-detail", args=[prolific_study.human_votes[0].pk])).json()
    assert vote["pseudonym"] == pseudonym and "participant_id" not in vote


def test_no_export_or_dashboard_page_carries_a_participant_id(prolific_study, staff_client):
    slug = prolific_study.study.slug
    urls = [reverse("analysis:export", args=[slug, name]) for name in exports.EXPORTS]
    urls += [reverse("analysis:plot", args=[slug, name, "csv"]) for name in plots.PLOTS]
    urls += [reverse(f"analysis:{name}", args=[slug]) for name in ("study", "raters", "power")]
    for url in urls:
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert PID not in body_of(response), url
    monitor = body_of(staff_client.get(reverse("analysis:raters", args=[slug])))
    assert f"R{prolific_study.rater.pk}" in monitor
    assert reverse("admin:annotations_rater_change", args=[prolific_study.rater.pk]) in monitor


def test_the_payment_file_and_the_admins_rater_page_do_carry_it(prolific_study, staff_client):
    slug = prolific_study.study.slug
    payment = body_of(staff_client.get(reverse("analysis:payment", args=[slug])))
    assert PID in payment and f"R{prolific_study.rater.pk}" in payment
    page = staff_client.get(reverse("admin:annotations_rater_change", args=[prolific_study.rater.pk]))
    assert PID in page.content.decode()
