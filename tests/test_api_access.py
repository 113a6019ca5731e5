"""Who may use the API: staff only, by token (scripts) or session (the browsable API and the
docs page). Anonymous visitors and raters (a session from the rater pages, no user) get 401,
logged-in users who are not staff 403, on every endpoint. Staff need Django's model permissions
as the admin applies them: the view permission to read, the add or change permission of what a
request writes; superusers have them all."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import Answer, Study, Vote
from api.permissions import required_permissions
from judges.models import JudgeRun
from tests.factories import make_staff, make_staff_with, view_permissions
from tests.test_analysis_import import GOOD_ROWS, write_csv
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


@pytest.mark.parametrize(
    ("persona", "status"), [("anon_client", 302), ("rater_session_client", 302), ("user_client", 302)]
)
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


def test_staff_manage_api_keys_in_the_admin_and_see_a_key_only_when_it_is_made(staff_client):
    owner = make_staff()
    changelist = reverse("admin:api_apikey_changelist")
    assert staff_client.get(changelist).status_code == 200
    assert staff_client.get(reverse("admin:api_apikey_add")).status_code == 200
    response = staff_client.post(reverse("admin:api_apikey_add"), {"user": owner.pk})
    assert response.status_code == 200, response.content
    token = Token.objects.get(user=owner)
    assert len(token.key) == 40
    assert token.key in response.content.decode(), "the page answering the creation shows the key"
    assert "no-store" in response["Cache-Control"]
    for page in (changelist, reverse("admin:api_apikey_change", args=[owner.pk])):
        shown = staff_client.get(page)
        assert shown.status_code == 200 and token.key not in shown.content.decode(), page
    delete = reverse("admin:api_apikey_delete", args=[owner.pk])
    assert staff_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Token.objects.filter(user=owner).exists()


def test_a_staff_member_who_may_add_keys_makes_one_only_for_themselves(db):
    """A key for another user would let its maker act as that user: only a superuser may."""
    superuser = make_staff()
    maker = make_staff_with("api.add_apikey", "api.view_apikey")
    client = Client()
    client.force_login(maker)
    add = reverse("admin:api_apikey_add")
    response = client.post(add, {"user": superuser.pk})
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not Token.objects.exists()
    response = client.post(add, {"user": maker.pk})
    assert response.status_code == 200
    assert Token.objects.get(user=maker).key in response.content.decode()


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


# --------------------------------------------------------------------------- model permissions


def client_of(user) -> APIClient:
    from django.core.cache import cache

    cache.clear()  # throttle budgets
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


NO_PERMISSION_NEEDED = {reverse("api:root"), reverse("api:schema") + "?format=json"}


def writes(data, tmp_path) -> dict[str, tuple[str, dict]]:
    """Every request that writes or starts something: name -> (url, APIClient.post keywords)."""
    votes = write_csv(tmp_path / "votes.csv", GOOD_ROWS).read_bytes()
    return {
        "import a study": (reverse("api:studies"), {"data": minimal_document(), "format": "json"}),
        "import votes": (
            reverse("api:votes-import"),
            {"data": {"file": SimpleUploadedFile("votes.csv", votes), "study": data.study.slug}, "format": "multipart"},
        ),
        "start a run": (reverse("api:runs"), {"data": {"study": data.study.slug, "judge": data.bot.pk}, "format": "json"}),
        "cancel a run": (reverse("api:run-cancel", args=[1]), {}),
        "resume a run": (reverse("api:run-resume", args=[1]), {}),
        "generate variants": (
            reverse("api:study-perturbations", args=[data.study.slug]),
            {"data": {"kind": "reference", "seed": 7}, "format": "json"},
        ),
        "review a variant": (reverse("api:answer-review", args=[data.variant.pk]), {"data": {"decision": "reject"}, "format": "json"}),
    }  # fmt: skip


def written() -> tuple:
    return (
        Study.objects.count(),
        Vote.objects.count(),
        JudgeRun.objects.count(),
        Answer.objects.count(),
        list(Answer.objects.values_list("review_status", flat=True).order_by("pk")),
    )


@pytest.fixture
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"


def test_a_staff_member_without_permissions_is_forbidden_everything_but_the_index_and_schema(
    voted_study, tmp_path, upload_dir
):
    client = client_of(make_staff_with())
    for url in get_urls(voted_study):
        response = client.get(url)
        if url in NO_PERMISSION_NEEDED:
            assert response.status_code == 200, url
        else:
            assert response.status_code == 403, url
            assert "permission" in response.json()["detail"]
    assert client.get(reverse("api:root")).status_code == 200
    before = written()
    for name, (url, kwargs) in writes(voted_study, tmp_path).items():
        assert client.post(url, **kwargs).status_code == 403, name
    assert written() == before


def test_a_staff_member_with_view_permissions_reads_everything_and_writes_nothing(voted_study, tmp_path, upload_dir):
    client = client_of(make_staff_with(*view_permissions()))
    for url in get_urls(voted_study):
        assert client.get(url).status_code == 200, url
    before = written()
    for name, (url, kwargs) in writes(voted_study, tmp_path).items():
        assert client.post(url, **kwargs).status_code == 403, name
    assert written() == before


@pytest.mark.parametrize(
    ("name", "perm", "status"),
    [
        ("import a study", "annotations.add_study", 201),
        ("import votes", "annotations.add_vote", 202),
        ("start a run", "judges.add_judgerun", 400),  # allowed; the service refuses a simulated judge
        ("cancel a run", "judges.change_judgerun", 404),  # allowed; there is no such run
        ("resume a run", "judges.change_judgerun", 404),
        ("generate variants", "perturbations.change_variant", 201),  # as the admin's generate page
        ("review a variant", "perturbations.change_variant", 400),  # allowed; its item has votes
    ],
)
def test_each_write_needs_the_permission_of_what_it_writes(voted_study, tmp_path, upload_dir, name, perm, status):
    url, kwargs = writes(voted_study, tmp_path)[name]
    assert client_of(make_staff_with(perm)).post(url, **kwargs).status_code == status


def test_a_vote_import_that_creates_its_study_needs_the_permission_to_add_studies(voted_study, tmp_path, upload_dir):
    def post(client):
        file = SimpleUploadedFile("votes.csv", write_csv(tmp_path / "votes.csv", GOOD_ROWS).read_bytes())
        data = {"file": file, "study": "made-here", "create": "true"}
        return client.post(reverse("api:votes-import"), data, format="multipart")

    assert post(client_of(make_staff_with("annotations.add_vote"))).status_code == 403
    assert post(client_of(make_staff_with("annotations.add_vote", "annotations.add_study"))).status_code == 202


def test_the_change_permission_is_enough_to_read_as_in_the_admin(voted_study):
    client = client_of(make_staff_with("annotations.change_study"))
    assert client.get(reverse("api:studies")).status_code == 200
    assert client.get(reverse("api:votes")).status_code == 403


def test_every_api_view_says_what_each_of_its_methods_needs():
    """A view that says nothing is for superusers only (safe, but useless to everyone else)."""

    def views(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from views(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "view_class"):
                yield pattern.callback.view_class

    api = get_resolver().resolve("/api/v1/").func.view_class.patterns
    silent = [
        (view.__name__, method)
        for view in set(views(api))
        for method in ("GET", "POST")
        if hasattr(view, method.lower()) and required_permissions(view(), method) is None
    ]
    assert not silent
