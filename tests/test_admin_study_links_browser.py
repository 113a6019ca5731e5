"""The study's admin page gives the links raters enter by (participant, Prolific with its
placeholders, MTurk ExternalQuestion), each with a working copy button, and links to the
study's dashboard, perturbation generation and review."""

import pytest
from django.urls import reverse

from tests.browser import chromium, expect, session_cookie
from tests.factories import make_staff, make_study

PROLIFIC = "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"


def test_the_study_page_lists_the_entry_links_and_where_to_go_next(db, staff_client):
    study = make_study(slug="crowd")
    page = staff_client.get(reverse("admin:annotations_study_change", args=[study.pk])).content.decode()
    landing = "http://testserver/s/crowd/"
    assert f'<code id="link-participant">{landing}</code>' in page
    assert f'<code id="link-prolific">{landing}{PROLIFIC.replace("&", "&amp;")}</code>' in page
    assert f'<code id="link-mturk">{landing}</code>' in page
    assert reverse("analysis:study", args=["crowd"]) in page
    assert f"{reverse('admin:perturbations_generate')}?ids={study.pk}" in page
    assert reverse("admin:perturbations_review", args=[study.pk]) in page


def test_the_study_page_says_where_finishers_from_another_platform_are_sent(db, staff_client):
    unset = make_study(slug="plain")
    page = staff_client.get(reverse("admin:annotations_study_change", args=[unset.pk])).content.decode()
    assert "other platform's completion URL" in page and 'id="link-platform-completion"' not in page
    study = make_study(slug="panel", completion_code="C1", platform_completion_url="https://x.example/d?t={code}")
    page = staff_client.get(reverse("admin:annotations_study_change", args=[study.pk])).content.decode()
    assert '<code id="link-platform-completion">https://x.example/d?t={code}</code>' in page
    assert (
        page.index('id="link-prolific"') < page.index('id="link-participant"') < page.index("link-platform-completion")
    )


def test_the_add_page_has_no_links_yet(db, staff_client):
    page = staff_client.get(reverse("admin:annotations_study_add")).content.decode()
    assert "Links for raters" not in page and "Review perturbations" not in page


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_each_copy_button_puts_its_link_on_the_clipboard(live_server):
    study = make_study(slug="crowd")
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 390, "height": 844})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
        context.add_cookies([session_cookie(make_staff(username="linker"), live_server.url)])
        page = context.new_page()
        page.goto(f"{live_server.url}{reverse('admin:annotations_study_change', args=[study.pk])}")
        landing = f"{live_server.url}/s/crowd/"
        for name, expected in (("participant", landing), ("prolific", landing + PROLIFIC), ("mturk", landing)):
            page.locator(f'[data-copy="link-{name}"]').click()
            expect(page.locator("#copy-status")).to_have_text(f"Copied: {expected}")
            assert page.evaluate("() => navigator.clipboard.readText()") == expected
        box = page.locator("#entry-links").bounding_box()
        assert box["x"] + box["width"] <= 390 + 1, "the links panel is wider than a phone"
        context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_buttons_above_the_form_do_not_cover_a_long_study_title(live_server):
    # The demo's title is this long: the admin's buttons, pulled up beside the page's heading,
    # were drawn over the title's second half.
    study = make_study(slug="long", title="Demo: how do judges react to errors, references and formatting?")
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([session_cookie(make_staff(username="reader"), live_server.url)])
        page = context.new_page()
        page.goto(f"{live_server.url}{reverse('admin:annotations_study_change', args=[study.pk])}")
        title = page.locator("#content > h2").bounding_box()
        tools = page.locator(".object-tools a")
        assert tools.count() == 5  # dashboard, Prolific, generate, review, history
        for i in range(tools.count()):
            tool = tools.nth(i).bounding_box()
            apart = (
                tool["y"] >= title["y"] + title["height"]
                or tool["y"] + tool["height"] <= title["y"]
                or tool["x"] >= title["x"] + title["width"]
                or tool["x"] + tool["width"] <= title["x"]
            )
            assert apart, (title, tool)
            shown = page.locator(".object-tools").bounding_box()  # overflow hidden: not cut off either
            assert tool["y"] + tool["height"] <= shown["y"] + shown["height"] + 1, (shown, tool)
        context.close()
