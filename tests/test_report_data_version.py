"""Every write a report reads moves its study's data version in its own transaction, so that the
next page or API request shows the new figure (annotations.data_version; analysis.stored_reports'
report_version): a change made where a researcher makes it (the admin, the rater page, a
service or the API), then the dashboard or the metrics API reloaded."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from analysis import simulated_judges
from analysis.models import StudyReport
from analysis.simulate import JudgeParams
from annotations.models import Answer, Judge, PerturbationKind, Question, Rater, Study, Vote
from judges.models import JudgeRun
from tests.factories import make_llm_judge, make_question, make_rater, make_study, make_variant, make_vote
from tests.test_admin_study_forms import form_as_sent
from tests.test_rater_views import signed_in, token_in
from vote_imports.vote_import import votes_import_path

SLUG = "versioned"
METRICS = reverse("api:study-metrics", args=[SLUG])
DASHBOARD = reverse("analysis:study", args=[SLUG])


@pytest.fixture
def study(db):
    study = make_study(slug=SLUG, votes_per_item=2)
    for i in range(4):
        q = make_question(study, a1="word " * (5 + 3 * i), a2="a longer answer " * 4, bloom_level="applying")
        if i < 2:
            make_variant(q, kind="factual_error", text="wrong " * (10 + i))
    simulated_judges.judge_simulate(study=study, name="sim", params=JudgeParams(position=1.0), seed=1)
    simulated_judges.raters_simulate(study=study, raters=3, params=JudgeParams(), votes_per_item=2, seed=2)
    return study


def metrics(client) -> dict:
    response = client.get(METRICS)
    assert response.status_code == 200, response.content
    return response.json()


def judge_entry(body: dict, name: str) -> dict | None:
    return next((j for j in body["judges"] if j["judge"] == name), None)


def rows_of(body: dict, **match) -> list[dict]:
    return [r for r in body["rows"] if all(r[k] == v for k, v in match.items())]


def semantics(body: dict) -> dict[str, str]:
    return {g["group"]: g["semantics"] for g in body["groups"]}


def admin_change(client, model: str, pk: int, **changes):
    """Post the admin change form of one object as the browser sends it, with ``changes``."""
    url = reverse(f"admin:{model}_change", args=[pk])
    response = client.post(url, form_as_sent(client.get(url), **changes))
    assert response.status_code == 302, response.context["adminform"].form.errors
    return response


def test_a_vote_deleted_on_its_own_is_in_the_next_report(study, token_client):
    before = judge_entry(metrics(token_client), "sim")["n_votes"]
    oldest = Vote.objects.filter(judge__name="sim").order_by("id").first()  # not its item's newest
    oldest.delete()
    assert judge_entry(metrics(token_client), "sim")["n_votes"] == before - 1


def test_a_judge_renamed_in_the_admin_is_in_the_next_report(study, token_client, staff_client):
    assert judge_entry(metrics(token_client), "sim")
    admin_change(staff_client, "annotations_judge", Judge.objects.get(name="sim").pk, name="simulated-renamed")
    body = metrics(token_client)
    assert judge_entry(body, "sim") is None and judge_entry(body, "simulated-renamed")


def test_an_llm_judge_renamed_on_its_configuration_page_is_in_the_next_report(study, token_client, staff_client):
    config = make_llm_judge(name="gpt-x")
    for item in study.items.all():
        make_vote(item, config.judge, run_id=None)
    assert judge_entry(metrics(token_client), "gpt-x")
    url = reverse("admin:judges_llmjudge_change", args=[config.pk])
    data = form_as_sent(staff_client.get(url), name="gpt-y")
    data.pop("created_at_0"), data.pop("created_at_1")
    response = staff_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    body = metrics(token_client)
    assert judge_entry(body, "gpt-x") is None and judge_entry(body, "gpt-y")


def test_an_answer_edited_in_the_admin_is_in_the_next_report_with_its_new_length(study, token_client, staff_client):
    def words_of(body):
        return [r for r in body["rows"] if r["metric"].startswith("length")] or body

    answer = Answer.objects.filter(question__study=study, derived_from__isnull=True).first()
    before = metrics(token_client)
    admin_change(staff_client, "annotations_answer", answer.pk, text="many more words " * 40)
    after = metrics(token_client)
    assert Answer.objects.get(pk=answer.pk).len_words == 120
    assert after["rows"] != before["rows"]


def test_two_questions_swapping_bloom_levels_is_in_the_next_report(study, token_client):
    first, second = Question.objects.filter(study=study).order_by("id")[1:3]  # one with a variant, one without
    first.bloom_level, second.bloom_level = "creating", "applying"
    first.save()
    before = [r for r in metrics(token_client)["rows"] if r["bloom"]]
    first.bloom_level, second.bloom_level = "applying", "creating"  # the two swap, as two admin saves do
    first.save()
    second.save()
    after = [r for r in metrics(token_client)["rows"] if r["bloom"]]
    assert {r["bloom"] for r in before} == {"applying", "creating"}
    assert before != after  # the same count at each level, other questions at them


def test_a_kinds_semantics_changed_in_the_admin_is_in_the_next_report(study, token_client, staff_client):
    own = PerturbationKind.objects.create(slug="own_kind", name="Own", semantics="degrading", study=study)
    question = Question.objects.filter(study=study).order_by("id").last()
    make_variant(question, kind="own_kind", text="changed " * 7)
    simulated_judges.judge_simulate(study=study, name="sim", params=JudgeParams(position=1.0), seed=3)
    assert semantics(metrics(token_client))["own_kind"] == "degrading"
    admin_change(staff_client, "annotations_perturbationkind", own.pk, semantics="non_semantic")
    assert semantics(metrics(token_client))["own_kind"] == "non_semantic"


def test_a_rater_flagged_in_the_admin_is_in_the_next_report(study, token_client, staff_client):
    before = judge_entry(metrics(token_client), "Humans")["n_votes"]
    rater = Rater.objects.filter(study=study, votes__isnull=False).distinct().first()
    action = {"action": "flag", "_selected_action": [rater.pk]}
    assert staff_client.post(reverse("admin:annotations_rater_changelist"), action).status_code == 302
    assert judge_entry(metrics(token_client), "Humans")["n_votes"] == before - rater.votes.count()


def test_a_rater_deleted_in_the_admin_is_in_the_next_report(study, token_client, staff_client):
    before = judge_entry(metrics(token_client), "Humans")["n_votes"]
    rater = Rater.objects.filter(study=study, votes__isnull=False).distinct().first()
    n = rater.votes.count()
    rater.votes.all().delete()  # a rater's votes are evidence: gone only by hand, before the rater
    url = reverse("admin:annotations_rater_delete", args=[rater.pk])
    assert staff_client.post(url, {"post": "yes"}).status_code == 302
    assert not Rater.objects.filter(pk=rater.pk).exists()
    assert judge_entry(metrics(token_client), "Humans")["n_votes"] == before - n


def test_a_run_deleted_is_in_the_next_report(study, token_client):
    judge = make_llm_judge(name="llm-runs").judge
    runs = [JudgeRun.objects.create(study=study, judge=judge, config={"votes_per_item": 1}) for _ in range(2)]
    for run in runs:
        for item in study.items.all():
            make_vote(item, judge, run_id=run.pk)
    assert judge_entry(metrics(token_client), "llm-runs")["runs"] == [runs[1].pk]  # the latest complete run
    JudgeRun.objects.filter(pk=runs[1].pk).delete()  # as a run no worker took is undone
    assert judge_entry(metrics(token_client), "llm-runs")["runs"] == [runs[0].pk]


def test_an_item_deleted_in_the_admin_is_in_the_next_report(study, token_client, staff_client):
    body = metrics(token_client)
    assert "factual_error" in semantics(body)
    for item in study.items.filter(kind__slug="factual_error"):
        item.votes.all().delete()
        url = reverse("admin:annotations_comparisonitem_delete", args=[item.pk])
        assert staff_client.post(url, {"post": "yes"}).status_code == 302
    assert "factual_error" not in semantics(metrics(token_client))


def test_the_studys_settings_changed_in_the_admin_are_in_the_next_report(study, token_client, staff_client):
    before = judge_entry(metrics(token_client), "Humans")["n_votes"]
    assert before > 0
    admin_change(staff_client, "annotations_study", study.pk, min_response_ms=10**9)
    assert judge_entry(metrics(token_client), "Humans")["n_votes"] == 0  # every vote too fast now


def test_a_vote_import_is_in_the_next_report(study, token_client, tmp_path):
    before = metrics(token_client)["filters"]["n_votes_total"]
    question = Question.objects.filter(study=study).order_by("id").first()
    path = tmp_path / "votes.csv"
    path.write_text(f"question_id,judge,choice,shown_first\n{question.external_id},imported-judge,a1,a1\n")
    votes_import_path(path=path, slug=SLUG, fmt="csv")
    after = metrics(token_client)
    assert after["filters"]["n_votes_total"] == before + 1 and judge_entry(after, "imported-judge")


def test_a_vote_through_the_rater_page_is_in_the_next_dashboard(study, staff_client):
    assert staff_client.get(DASHBOARD).status_code == 200
    n = StudyReport.objects.get(study=study).n_votes
    rater = make_rater(study)
    browser, task = signed_in(rater), reverse("annotations:task", args=[SLUG])
    assert browser.post(task, {"token": token_in(browser.get(task)), "choice": "first"}).status_code == 302
    page = staff_client.get(DASHBOARD).content.decode()
    assert f"from {n + 1} votes" in page


def test_a_judge_runs_votes_and_its_retry_of_a_failed_vote_in_place_are_in_the_next_report(study, token_client):
    from judges.plan import PlannedVote
    from judges.runner import Outcome, Unit, write_outcomes

    judge = make_llm_judge(name="llm-retry").judge
    run = JudgeRun.objects.create(study=study, judge=judge, status="running", heartbeat_at=timezone.now())
    items = list(study.items.order_by("id"))

    def outcome(item, *, status="ok", existing=None):
        planned = PlannedVote(round=0, shown_first="a1", scheme="answer12", sample=0)
        unit = Unit(item_id=item.pk, planned=planned, messages=[], keys=[], existing_vote_id=existing)
        return Outcome(unit=unit, status=status, choice_shown="first" if status == "ok" else None)

    assert write_outcomes(run, [outcome(items[0]), outcome(items[1], status="failed")])
    assert judge_entry(metrics(token_client), "llm-retry")["n_votes"] == 1
    failed = Vote.objects.get(run_id=run.pk, parse_status="failed")
    assert write_outcomes(run, [outcome(items[1], existing=failed.pk)])  # rewritten in place
    assert judge_entry(metrics(token_client), "llm-retry")["n_votes"] == 2


def test_the_dashboard_of_an_unchanged_study_costs_the_same_queries_whatever_its_items_and_reads_no_vote(
    staff_client,
):
    counts = []
    for n_items in (5, 50):
        study = make_study(slug=f"unvoted-{n_items}")
        for _ in range(n_items):
            make_question(study)
        url = reverse("analysis:study", args=[study.slug])
        assert staff_client.get(url).status_code == 200  # computed and stored
        with CaptureQueriesContext(connection) as queries:
            assert staff_client.get(url).status_code == 200
        counts.append(len(queries))
        # The newest vote of each item was looked up here: a scan of the votes per unvoted item.
        assert not [q["sql"] for q in queries if "annotations_vote" in q["sql"]]
    assert counts[0] == counts[1], counts


def test_distinct_seeds_and_bootstraps_do_not_pile_up_stored_reports(study, token_client):
    from analysis.stored_reports import OTHER_VIEWS_KEPT

    metrics(token_client)
    for seed in range(OTHER_VIEWS_KEPT + 5):
        assert token_client.get(METRICS, {"seed": seed + 1, "bootstrap": 20}).status_code == 200
    assert token_client.get(METRICS, {"since": "2020-01-01T00:00:00Z"}).status_code == 200
    assert StudyReport.objects.filter(study=study).count() == 1 + OTHER_VIEWS_KEPT
    default = StudyReport.objects.filter(study=study).order_by("id").first()
    assert default.request["options"]["seed"] == 0 and default.request["filters"]["since"] is None
    assert StudyReport.objects.filter(study=study, request__filters__since__isnull=False).exists()


def test_a_save_of_a_study_read_before_a_vote_does_not_put_its_data_version_back(study):
    stale = Study.objects.get(pk=study.pk)
    Study.objects.filter(pk=study.pk).data_changed()
    moved = Study.objects.get(pk=study.pk).data_version
    stale.title = "Renamed"
    stale.save()
    assert Study.objects.get(pk=study.pk).data_version == moved + 1  # its own save moved it once more


def test_a_migrate_that_finds_the_built_in_kinds_as_they_are_moves_no_study_on(study):
    from perturbations.services import kinds_ensure_builtin

    before = Study.objects.get(pk=study.pk).data_version
    kinds_ensure_builtin()  # what each migrate runs (post_migrate)
    assert Study.objects.get(pk=study.pk).data_version == before
