"""The API's documentation page renders in a real browser from our own static files: no
request leaves the machine (there is no CDN where this runs)."""

import os
from urllib.parse import urlsplit

import pytest

from tests.browser import chromium, session_cookie
from tests.factories import make_staff


@pytest.mark.browser
def test_the_docs_page_renders_every_endpoint_without_leaving_the_machine(live_server, transactional_db):
    origin = urlsplit(live_server.url)
    requested, refused = [], []

    def only_local(route):
        url = urlsplit(route.request.url)
        if (url.scheme, url.netloc) == (origin.scheme, origin.netloc):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        context.add_cookies([session_cookie(make_staff(), live_server.url)])
        context.route("**/*", only_local)
        page = context.new_page()
        page.on("request", lambda request: requested.append(request.url))
        page.goto(f"{live_server.url}/api/docs/", timeout=15_000)
        page.wait_for_selector(".swagger-ui .opblock", timeout=15_000)
        operations = page.locator(".swagger-ui .opblock").count()
        title = page.locator(".swagger-ui .info .title").inner_text()
        shot = os.environ.get("API_DOCS_SCREENSHOT")
        if shot:
            page.screenshot(path=shot, full_page=False)

    assert refused == []
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/" in url for url in requested)
    assert any(url.startswith(f"{live_server.url}/api/schema/") for url in requested)
    assert "biasstudy API" in title
    assert operations == len(schema_operations()) > 0  # every operation of the schema is drawn


def schema_operations() -> list[tuple[str, str]]:
    """(path, method) of every operation the OpenAPI schema holds, as drf-spectacular makes it."""
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    methods = {"get", "post", "put", "patch", "delete"}
    return [(path, method) for path, item in paths.items() for method in item if method in methods]
