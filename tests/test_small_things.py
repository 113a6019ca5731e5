"""Small things users notice: a favicon, the API's root lists its endpoints, the admin and the
dashboard link to the API docs, "Start a run" preselects where it came from, a finished run
offers no "Resume", messages name a study by its title."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from api.urls import v1
from judges.models import JudgeRun
from judges.services import judge_run_start
from tests.factories import make_llm_judge, make_question, make_study

pytestmark = pytest.mark.django_db


def test_every_page_names_a_favicon_that_exists_and_favicon_ico_leads_to_it(anon_client, staff_client):
    study = make_study()
    icon = '<link rel="icon" href="/static/biasstudy/favicon.svg" type="image/svg+xml">'
    assert icon in anon_client.get(reverse("annotations:landing", args=[study.slug])).content.decode()
    assert icon in staff_client.get(reverse("admin:index")).content.decode()
    assert icon in staff_client.get(reverse("analysis:studies")).content.decode()
    assert finders.find("biasstudy/favicon.svg")
    response = anon_client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/biasstudy/favicon.svg"


def test_the_api_root_lists_its_endpoints(token_client):
    response = token_client.get("/api/v1/")
    assert response.status_code == 200
    body = response.json()
    urls = {e["name"]: e["url"] for e in body["endpoints"]}
    assert urls["studies"] == "http://testserver/api/v1/studies/"
    assert urls["votes"] == "http://testserver/api/v1/votes/"
    assert urls["study-detail"] == "http://testserver/api/v1/studies/<slug:slug>/"
    assert len(urls) == len(body["endpoints"]) == len(v1) - 1  # all but the root itself
    assert body["docs"] == "http://testserver/api/docs/"


def test_the_api_root_needs_a_token_like_every_endpoint(anon_client):
    assert anon_client.get("/api/v1/").status_code in (401, 403)


def test_the_admin_and_the_dashboard_link_to_the_api_docs(staff_client):
    study = make_study()
    docs = f'href="{reverse("api:docs")}"'
    assert docs in staff_client.get(reverse("admin:index")).content.decode()
    assert docs in staff_client.get(reverse("analysis:studies")).content.decode()
    assert docs in staff_client.get(reverse("analysis:study", args=[study.slug])).content.decode()


@pytest.fixture
def config():
    return make_llm_judge(base_url="http://127.0.0.1:9/v1")


def selected(html: str, name: str) -> str | None:
    """The value of the selected option of the select named `name`."""
    select = html[html.index(f'name="{name}"') :]
    select = select[: select.index("</select>")]
    for option in select.split("<option")[1:]:
        if " selected" in option.split(">")[0]:
            return option.split('value="')[1].split('"')[0]
    return None


def test_start_a_run_preselects_the_study_it_came_from(staff_client, config):
    make_study()
    study = make_study()
    add = reverse("admin:judges_judgerun_add")
    html = staff_client.get(f"{add}?study={study.pk}").content.decode()
    assert selected(html, "study") == str(study.pk)
    html = staff_client.get(f"{add}?_changelist_filters=study__id__exact%3D{study.pk}").content.decode()
    assert selected(html, "study") == str(study.pk)
    html = staff_client.get(f"{add}?judge={config.judge_id}").content.decode()
    assert selected(html, "judge") == str(config.judge_id) and not selected(html, "study")
    dashboard = staff_client.get(reverse("analysis:study", args=[study.slug])).content.decode()
    assert f'href="{add}?study={study.pk}"' in dashboard


def run_page(staff_client, config, status: str) -> str:
    study = make_study()
    make_question(study)
    run = judge_run_start(study=study, judge=config.judge, enqueue=False)
    JudgeRun.objects.filter(pk=run.pk).update(status=status)
    return staff_client.get(reverse("admin:judges_judgerun_change", args=[run.pk])).content.decode()


def test_a_finished_run_does_not_offer_resume(staff_client, config):
    html = run_page(staff_client, config, JudgeRun.Status.DONE)
    assert "Resume run" not in html and "Ask again" not in html
    assert "Resume run" in run_page(staff_client, config, JudgeRun.Status.CANCELLED)


def test_the_run_page_names_its_progress_bar_and_can_be_paused(staff_client, config):
    html = run_page(staff_client, config, JudgeRun.Status.RUNNING)
    assert 'role="progressbar" aria-label="Votes done"' in html
    assert "data-refresh-toggle" in html and "Pause updates" in html and "data-auto-refresh" in html


def test_a_perturbation_message_names_the_study_by_its_title(staff_client):
    study = make_study(slug="boil", title="Boiling water")
    make_question(study, a1="It boils at 100 °C.", a2="Water boils at 100 degrees Celsius at sea level.")
    url = reverse("admin:perturbations_generate") + f"?ids={study.pk}"
    response = staff_client.post(url, {"kind": "rich_content", "seed": 2, "method": "rule", "of": "a2"}, follow=True)
    html = response.content.decode()
    assert "Boiling water: created 1 pending variant(s)" in html
    assert "boil:" not in html and "Boil:" not in html


def test_the_dashboard_s_help_texts_have_the_ids_its_fields_point_to(staff_client):
    study = make_study()
    html = staff_client.get(reverse("analysis:study", args=[study.slug])).content.decode()
    pointed = set(re.findall(r'aria-describedby="([^"]+)"', html))
    assert pointed, "the filter fields with help texts point to them"
    for ids in pointed:
        for id_ in ids.split():
            assert f'id="{id_}"' in html, f"{id_} is pointed to but does not exist"
