"""Who may use the API: staff only, by token (scripts) or session (the browsable API and the
docs page). Anonymous visitors and raters (a session from the rater pages, no user) get 401,
logged-in users who are not staff 403, on every endpoint."""

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from annotations.models import Study
from tests.factories import make_staff
from tests.test_study_import import minimal_document


def get_urls(data) -> list[str]:
    slug = data.study.slug
    return [
        reverse("api:studies"),
        reverse("api:study-detail", args=[slug]),
        reverse("api:study-export", args=[slug]),
        reverse("api:study-questions", args=[slug]),
        reverse("api:study-answers", args=[slug]),
        reverse("api:study-items", args=[slug]),
        reverse("api:study-raters", args=[slug]),
        reverse("api:question-detail", args=[data.questions[0].pk]),
        reverse("api:answer-detail", args=[data.variant.pk]),
        reverse("api:item-detail", args=[data.items[0].pk]),
        reverse("api:rater-detail", args=[data.rater.pk]),
        reverse("api:judges"),
        reverse("api:judge-detail", args=[data.bot.pk]),
        reverse("api:votes"),
        reverse("api:vote-detail", args=[data.human_votes[0].pk]),
        reverse("api:llm-judges"),
        reverse("api:runs"),
        reverse("api:study-metrics", args=[slug]) + "?bootstrap=20",
        reverse("api:study-export-votes", args=[slug]),
        reverse("api:study-export-items", args=[slug]),
        reverse("api:study-export-metrics", args=[slug]),
        reverse("api:study-perturbations", args=[slug]),
        reverse("api:schema") + "?format=json",
    ]


def test_every_endpoint_answers_staff_with_a_token(voted_study, token_client):
    for url in get_urls(voted_study):
        assert token_client.get(url).status_code == 200, url


def test_every_endpoint_answers_staff_in_the_browser(voted_study, staff_client):
    for url in get_urls(voted_study):
        assert staff_client.get(url).status_code == 200, url


def test_the_browsable_api_renders_for_staff(voted_study, staff_client):
    response = staff_client.get(reverse("api:votes"), HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert b"Votes" in response.content


@pytest.mark.parametrize("persona", ["anon_client", "rater_session_client"])
def test_anonymous_visitors_and_raters_are_asked_to_authenticate(voted_study, persona, request):
    client = request.getfixturevalue(persona)
    for url in get_urls(voted_study):
        response = client.get(url)
        assert response.status_code == 401, url
        assert response.json() == {"detail": "Authentication credentials were not provided."}
        assert response["WWW-Authenticate"] == "Token"


def test_users_who_are_not_staff_are_forbidden(voted_study, user_client):
    for url in get_urls(voted_study):
        response = user_client.get(url)
        assert response.status_code == 403, url
        assert response.json()["detail"]


@pytest.mark.parametrize(
    ("persona", "status"), [("anon_client", 401), ("rater_session_client", 401), ("user_client", 403)]
)
def test_only_staff_may_import_a_study(db, rater, persona, status, request):
    client = request.getfixturevalue(persona)
    response = client.post(reverse("api:studies"), data=minimal_document(), content_type="application/json")
    assert response.status_code == status
    assert not Study.objects.filter(slug="mini").exists()


def test_a_wrong_token_is_refused(voted_study, client):
    response = client.get(reverse("api:studies"), HTTP_AUTHORIZATION="Token not-a-real-token")
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token."}


def test_a_token_of_a_user_no_longer_staff_is_forbidden(voted_study, api_token, token_client):
    api_token.user.is_staff = False
    api_token.user.save()
    assert token_client.get(reverse("api:studies")).status_code == 403


def test_a_token_of_a_deactivated_user_is_refused(voted_study, api_token, token_client):
    api_token.user.is_active = False
    api_token.user.save()
    assert token_client.get(reverse("api:studies")).status_code == 401


@pytest.mark.parametrize(("persona", "status"), [("anon_client", 302), ("rater_session_client", 302), ("user_client", 302)])
def test_the_docs_page_sends_everyone_but_staff_to_the_login(db, rater, persona, status, request):
    response = request.getfixturevalue(persona).get(reverse("api:docs"))
    assert response.status_code == status
    assert response["Location"].startswith(reverse("admin:login"))


def test_the_docs_page_is_served_to_staff_with_local_assets(staff_client):
    response = staff_client.get(reverse("api:docs"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert "cdn" not in page.lower()


def test_staff_manage_tokens_in_the_admin(staff_client):
    owner = make_staff()
    changelist = reverse("admin:authtoken_tokenproxy_changelist")
    assert staff_client.get(changelist).status_code == 200
    assert staff_client.get(reverse("admin:authtoken_tokenproxy_add")).status_code == 200
    response = staff_client.post(reverse("admin:authtoken_tokenproxy_add"), {"user": owner.pk})
    assert response.status_code == 302, response.content
    token = Token.objects.get(user=owner)
    assert len(token.key) == 40
    delete = reverse("admin:authtoken_tokenproxy_delete", args=[owner.pk])
    assert staff_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Token.objects.filter(user=owner).exists()


def test_the_drf_create_token_command_makes_a_token(db):
    from django.core.management import call_command

    owner = make_staff()
    call_command("drf_create_token", owner.username, verbosity=0)
    assert Token.objects.filter(user=owner).exists()


@pytest.mark.parametrize("path", ["/api/v1/nothing-here/", "/api/v1/studies/a%0Ab/questions/", "/api/v1/votes/-1/"])
def test_an_unknown_api_path_is_a_json_404(token_client, path):
    response = token_client.get(path)
    assert response.status_code == 404
    assert response.json()["detail"]
