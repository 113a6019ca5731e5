"""Every URL pattern of the project x anonymous visitor, rater, another rater, staff (a
superuser), a staff member without permissions, one with every view permission only and one who
may only add votes.

The routes are read from the URL resolver; each must have a rule in ACCESS, so a new URL that
nobody classified fails test_every_route_has_an_access_rule. Everything under admin/, api/ and
dashboard/ is staff only (custom admin views included), and follows Django's model permissions:
without any, a staff member gets only what needs none (NO_PERMISSION_NEEDED); with view
permissions only, every page that reads but none that writes (WRITE_PAGES); with "add vote" only,
the vote import's pages (ADD_VOTE_PAGES) and nothing else. The rater pages show only the asking
rater's own state; health and the study list are public. No page shows anyone an API key (a key
is shown once, on the page that answers its creation), not even to a superuser.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver
from rest_framework.authtoken.models import Token

from annotations.models import Vote
from tests.factories import (
    human_pool,
    make_question,
    make_staff,
    make_staff_with,
    make_study,
    make_variant,
    make_vote,
    view_permissions,
)

# route (as the resolver spells it) -> who may use it
ACCESS: dict[str, str] = {
    "": "public",
    "health/": "public",
    "favicon.ico": "public",  # a redirect to the static icon
    "s/<slug:slug>/": "public",  # the landing page: anyone may read the study's information
    "s/<slug:slug>/task/": "rater",
    "s/<slug:slug>/done/": "rater",
    "admin/login/": "public",
    "admin/logout/": "post_only",
    "api/^[\\s\\S]*$": "not_found",  # the API's JSON 404 for every unknown path
}
PREFIX_RULES = [
    ("admin/django_rq/", "staff_needs_redis"),
    ("admin/", "staff"),
    ("api/", "staff"),
    ("dashboard/", "staff"),
    ("prolific/", "staff"),
]

# Regular-expression routes: a concrete path to try for each.
SAMPLES = {
    "admin/django_rq/dashboard/^stats.json/?$": "admin/django_rq/dashboard/stats.json",
    "admin/django_rq/dashboard/^stats.json/(?P<token>[\\w]+)?/?$": "admin/django_rq/dashboard/stats.json/abc/",
    "admin/(?P<url>.*)$": "admin/no-such-page/",
    "api/^[\\s\\S]*$": "api/no-such-endpoint",
    "dashboard/<slug:slug>/export/<str:name>.csv": "dashboard/matrix/export/votes.csv",
    "dashboard/<slug:slug>/plot/<str:name>.<str:fmt>": "dashboard/matrix/plot/forest.svg",
}

# Staff pages any staff member may open, whatever their permissions: the admin's index (it lists
# what they may see), their own password, the API's index, schema and documentation.
NO_PERMISSION_NEEDED = {
    "admin/",
    "admin/jsi18n/",
    "admin/password_change/",
    "admin/password_change/done/",
    "api/docs/",
    "api/schema/",
    "api/v1/",
}
# Pages (GET included) that write, start or import something, or follow what one started: closed
# to a staff member who may only read.
WRITE_PAGES = re.compile(
    r"(add|delete|autocomplete|edit|generate|cancel|resume|test-connection|password)/$"
    r"|study/upload/|votes/import/|study-imports/|api/v1/answers/<int:pk>/review/"
    # The Prolific page acts on Prolific (drafts, publishing, reviews, bonuses): change_study.
    r"|prolific/study/"
)


# What a staff member who may only add votes may open: the vote import's form and progress.
ADD_VOTE_PAGES = re.compile(r"votes/import/")

PERSONAS = [
    "anonymous",
    "rater",
    "other_rater",
    "staff",
    "staff_no_permissions",
    "staff_view_only",
    "staff_add_vote_only",
]


def routes() -> list[str]:
    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern)

    return sorted(set(walk(get_resolver().url_patterns)))


def rule(route: str) -> str | None:
    if route in ACCESS:
        return ACCESS[route]
    return next((category for prefix, category in PREFIX_RULES if route.startswith(prefix)), None)


def test_every_route_has_an_access_rule():
    unclassified = [route for route in routes() if rule(route) is None]
    assert not unclassified, f"classify these routes in ACCESS: {unclassified}"
    regex_routes = [route for route in routes() if "^" in route or "(?P" in route]
    missing = [route for route in regex_routes if _sample(route) is None]
    assert not missing, f"give a sample path for these regular-expression routes: {missing}"


def _sample(route: str) -> str | None:
    if route in SAMPLES:
        return SAMPLES[route]
    # The admin's app-index route lists the installed apps, which depend on settings.
    return "admin/annotations/" if route.startswith("admin/^(?P<app_label>") else None


def _path(route: str, world) -> str:
    if _sample(route) is not None:
        return "/" + _sample(route)
    from django.contrib.contenttypes.models import ContentType

    ids = {
        "study_id": world.study.pk,
        # An API key's admin pages are named by its owner's id (DRF's TokenProxy).
        "object_id": world.superuser.pk if route.startswith(("admin/api/", "admin/authtoken/")) else None,
        "answer_id": world.variant.pk,
        "content_type_id": ContentType.objects.get_for_model(world.study).pk,
    }
    if ids["object_id"] is None:
        ids["object_id"] = world.study.pk if "<path:content_type_id>" in route else world.vote.pk
    path = re.sub(r"<slug:\w+>", world.study.slug, route)
    path = re.sub(r"<(?:int|str|path):(\w+)>", lambda m: str(ids.get(m.group(1), world.vote.pk)), path)
    return "/" + path


@pytest.fixture
def world(db):
    from types import SimpleNamespace

    study = make_study(slug="matrix", votes_per_item=2, target_per_rater=2)
    question = make_question(study)
    make_question(study)
    variant = make_variant(question)
    vote = make_vote(study.items.first(), human_pool(study))
    personas = {name: Client() for name in PERSONAS}
    for name in ("rater", "other_rater"):
        assert personas[name].post("/s/matrix/", {"participant_id": name, "consent": "on"}).status_code == 302
    superuser, view_only = make_staff(), make_staff_with(*view_permissions())
    personas["staff"].force_login(superuser)
    personas["staff_no_permissions"].force_login(make_staff_with())
    personas["staff_view_only"].force_login(view_only)
    personas["staff_add_vote_only"].force_login(make_staff_with("annotations.add_vote"))
    keys = [Token.objects.create(user=user).key for user in (superuser, view_only)]
    return SimpleNamespace(study=study, variant=variant, vote=vote, personas=personas, superuser=superuser, keys=keys)


def _allowed(category: str, persona: str, route: str, response) -> bool:
    status, location = response.status_code, response.get("Location", "")
    if status >= 500:
        return False
    if category == "public":
        return status < 400
    if category == "post_only":
        return status in (302, 405)
    if category == "not_found":
        return status == 404
    if category == "rater":
        if persona in ("rater", "other_rater"):
            return status in (200, 302) and "/admin/" not in location
        return status == 302 and location.endswith(f"/s/{'matrix'}/")
    # staff only
    if persona == "staff_add_vote_only" and ADD_VOTE_PAGES.search(route):
        # The form, and a progress page (a sample token: back to the form); the API's import is
        # a POST (refused or not allowed as a GET) and its state a 404 for a sample token.
        return (status < 400 or route.startswith("api/")) and "/admin/login/" not in location
    if persona in ("staff_no_permissions", "staff_add_vote_only") and route not in NO_PERMISSION_NEEDED:
        # Refused; or the admin's 404 for an app they may not see, 405 for a POST-only page, or
        # its redirect from an object's old address to its change page (refused in turn).
        admin_way = route.startswith("admin/") and (
            status in (404, 405) or (status == 302 and location.startswith("/admin/") and "login" not in location)
        )
        return status == 403 or admin_way
    if persona == "staff_view_only" and WRITE_PAGES.search(route):
        return status in (403, 405)
    if persona.startswith("staff"):
        # Some admin pages are closed to everyone by design (votes are never added by hand...).
        by_design = route.endswith(("add/", "delete/", "autocomplete/")) and status == 403
        return (status not in (401, 403) or by_design) and "/admin/login/" not in location
    return status in (401, 403) or (status == 302 and "/admin/login/" in location)


@pytest.mark.parametrize("persona", PERSONAS)
def test_each_route_answers_each_persona_as_the_matrix_says(world, persona):
    client = world.personas[persona]
    client.raise_request_exception = False
    wrong = []
    for route in routes():
        category = rule(route)
        if category == "staff_needs_redis" and persona.startswith("staff"):
            continue  # the RQ dashboard needs a Redis server: test_security_rq_dashboard has one
        category = "staff" if category == "staff_needs_redis" else category
        response = client.get(_path(route, world))
        if not _allowed(category, persona, route, response):
            wrong.append((route, _path(route, world), response.status_code, response.get("Location", "")))
        elif _shows_a_key(response, world.keys):
            wrong.append((route, _path(route, world), "shows an API key"))
    assert not wrong, f"{persona}: {wrong}"


def _shows_a_key(response, keys: list[str]) -> bool:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return any(key.encode() in body for key in keys)


def test_no_page_of_the_api_keys_shows_a_key_to_view_only_staff(world):
    """Every admin page of the key model (list, change page, history...) and every API listing,
    read by a staff member holding every "view" permission, and by a superuser: the superuser's
    key, and their own, are nowhere. (Reading the superuser's key is becoming the superuser.)"""
    key_routes = [route for route in routes() if route.startswith(("admin/api/", "admin/authtoken/", "api/"))]
    assert any("apikey" in route or "tokenproxy" in route for route in key_routes)
    for persona in ("staff_view_only", "staff"):
        client = world.personas[persona]
        shown = []
        for route in key_routes:
            response = client.get(_path(route, world))
            if _shows_a_key(response, world.keys):
                shown.append((route, response.status_code))
        assert not shown, f"{persona} reads an API key on {shown}"
    listing = world.personas["staff_view_only"].get("/admin/api/apikey/")
    assert listing.status_code == 200 and world.superuser.username in listing.content.decode()


def test_a_rater_sees_and_votes_only_on_their_own_items(world):
    rater, other = world.personas["rater"], world.personas["other_rater"]
    token = re.compile(r'name="token" value="([^"]+)"')
    mine = token.search(rater.get("/s/matrix/task/").content.decode()).group(1)
    theirs = token.search(other.get("/s/matrix/task/").content.decode()).group(1)
    assert mine != theirs
    before = Vote.objects.count()
    response = rater.post("/s/matrix/task/", {"token": theirs, "choice": "first", "client_ms": "5000"})
    assert response.status_code == 302 and response["Location"] == "/s/matrix/task/?notice=not_yours"
    assert Vote.objects.count() == before
    assert theirs not in rater.get(response["Location"]).content.decode(), "the rater is shown their own item"
    # A session on one study is no rater of another.
    make_study(slug="elsewhere")
    assert rater.get("/s/elsewhere/task/")["Location"].endswith("/s/elsewhere/")
