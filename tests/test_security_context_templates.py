"""A context line names the answers and nothing else. A format, conversion, attribute or index
(`{A2:{A1}}`, `{A2!r}`, `{A2:>20000000}`) is refused on every way in, naming the field: the study
file, the review page's editor, the admin. One stored before that rule (straight in the
database here) neither takes the rater's task page down nor blows it up, and a judge run over it
finishes. The judges' own prompt templates follow the same rule, and the default ones render as
they always did."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotations.models import Answer, ComparisonItem
from annotations.study_files import StudyFileError, study_export, study_import
from judges.models import JudgeRun, LLMJudge
from judges.prompts import (
    DEFAULT_SYSTEM_TEMPLATE,
    DEFAULT_USER_TEMPLATE,
    LABEL_SCHEMES,
    VOTE_INSTRUCTIONS,
    PromptError,
    check_template,
    render_messages,
)
from judges.services import judge_run_execute, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study, make_variant, originals
from tests.judge_server import JudgeServer
from tests.test_context_same_words import _task_page

pytestmark = pytest.mark.django_db

FORMATTED = ["{A2:{A1}} was preferred by most readers.", "{A2!r} was preferred.", "{A2:>20000000} was preferred."]


@pytest.fixture
def context_item():
    """A bandwagon item whose context is valid; tests write a legacy one over it."""
    study = make_study(slug="ctx-sec", votes_per_item=2)
    question = make_question(study, text="Which is better?", a1="A GOOD answer.", a2="A weak answer.")
    a2 = originals(question)[1]
    variant = make_variant(question, kind="bandwagon", text=a2.text, context="Most readers preferred {A2}.")
    return ComparisonItem.objects.get(answer_a2=variant)


def _store_as_before_the_rule(item: ComparisonItem, context: str) -> None:
    Answer.objects.filter(pk=item.answer_a2_id).update(context=context)


@pytest.mark.parametrize("context", FORMATTED)
def test_a_rater_holding_an_item_with_a_stored_formatted_context_gets_a_small_page(context_item, context):
    _store_as_before_the_rule(context_item, context)
    for shown_first in ("a1", "a2"):
        page = _task_page(context_item.study, context_item, shown_first)
        a2_label = "Answer 2" if shown_first == "a1" else "Answer 1"
        assert f"{a2_label} was preferred" in page
        assert len(page) < 100_000


def test_a_judge_run_over_a_stored_formatted_context_finishes_with_every_vote(context_item):
    _store_as_before_the_rule(context_item, FORMATTED[0])
    with JudgeServer() as server:
        config = make_llm_judge(base_url=server.base_url, prompt_style="vote_only", votes_per_item=2)
        run = judge_run_start(study=context_item.study, judge=config.judge, enqueue=False)
        run = judge_run_execute(run_id=run.pk)
        prompts = [request["prompt"] for request in server.requests_for("was preferred by most readers")]
    assert run.status == JudgeRun.Status.DONE, run.error
    votes = run.votes.filter(item=context_item)
    assert votes.count() == 2 and all(vote.parse_status == "ok" for vote in votes)
    assert len(prompts) == 2
    assert all(any(f"{label} was preferred" in p for label in ("Answer1", "Answer2")) for p in prompts)


@pytest.mark.parametrize("context", FORMATTED)
def test_the_study_file_refuses_a_formatted_context_naming_the_field(context_item, context, tmp_path):
    document = study_export(study=context_item.study)
    document["study"]["slug"] = "ctx-copy"
    record = document["questions"][0]
    next(a for a in record["answers"] if a.get("kind") == "bandwagon")["context"] = context
    path = tmp_path / "study.json"
    path.write_text(json.dumps(document))
    with pytest.raises(StudyFileError) as caught:
        study_import(path=path, fmt="biasstudy")
    problem = caught.value.problems[0]
    assert problem.field.endswith(".context") and "after the name" in problem.message, problem
    assert context.split("}")[0].split("{")[-1] in problem.message  # the field, as written


@pytest.mark.parametrize("context", FORMATTED)
def test_the_review_page_editor_refuses_a_formatted_context(staff_client, context_item, context):
    edit = reverse("admin:perturbations_edit", args=[context_item.study.pk, context_item.answer_a2_id])
    response = staff_client.post(edit, {"context": context, "note": "x"})
    assert response.status_code == 200
    assert "after the name" in response.content.decode()
    assert Answer.objects.get(pk=context_item.answer_a2_id).context == "Most readers preferred {A2}."


@pytest.mark.parametrize("context", FORMATTED)
def test_the_admin_takes_no_context_and_the_model_refuses_a_formatted_one(staff_client, context_item, context):
    """The answer's admin form has no context field (the review page edits it): a posted one is
    not stored. The model's own validator, which any form of it runs, refuses it, naming it."""
    change = reverse("admin:annotations_answer_change", args=[context_item.answer_a2_id])
    form = staff_client.get(change).context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {name: "" if value is None else value for name, value in data.items()}
    response = staff_client.post(change, {**data, "context": context})
    assert response.status_code == 302
    answer = Answer.objects.get(pk=context_item.answer_a2_id)
    assert answer.context == "Most readers preferred {A2}."
    answer.context = context
    with pytest.raises(ValidationError) as caught:
        answer.full_clean()
    assert "after the name" in " ".join(caught.value.message_dict["context"])


@pytest.mark.parametrize("template", ["{question!r}\n{first}", "{first:>9999999}", "{question.__class__}"])
def test_a_judge_template_with_anything_but_names_is_refused(template):
    with pytest.raises(PromptError, match="user_template: .* after the name"):
        check_template(template, where="user_template")
    config = LLMJudge(model="m", base_url="http://127.0.0.1:9/v1", user_template=template)
    with pytest.raises(Exception, match="after the name"):
        config.clean()


def test_a_judge_template_stored_before_the_rule_is_filled_with_bare_values():
    messages = render_messages(
        system_template="Judge {label_tie!r}.",
        user_template="{question:>9999999}|{first}|{second}|{vote_instruction}",
        style="vote_only",
        question="Q?",
        first="one",
        second="two",
        scheme=LABEL_SCHEMES["ab"],
    )
    assert messages[0]["content"] == "Judge Tie."
    assert messages[1]["content"].startswith("Q?|one|two|Reply with exactly one word: A, B or Tie.")


def _as_before(*, system_template, user_template, style, question, first, second, scheme, context=""):
    """The prompt as `str.format` rendered it before the rule (the code as it was)."""
    labels = {"label_first": scheme.first, "label_second": scheme.second, "label_tie": scheme.tie}
    block = f"{context}\n\n" if context else ""
    fields = {
        **labels,
        "question": question,
        "first": first,
        "second": second,
        "vote_instruction": VOTE_INSTRUCTIONS[style].format(**labels),
        "context": block,
    }
    return [
        {"role": "system", "content": system_template.format(**fields)},
        {"role": "user", "content": user_template.format(**fields)},
    ]


@pytest.mark.parametrize("style", sorted(VOTE_INSTRUCTIONS))
@pytest.mark.parametrize("scheme", sorted(LABEL_SCHEMES))
@pytest.mark.parametrize("context", ["", "Most readers preferred A."])
def test_the_default_templates_render_byte_for_byte_as_before(style, scheme, context):
    args = {
        "system_template": DEFAULT_SYSTEM_TEMPLATE,
        "user_template": DEFAULT_USER_TEMPLATE,
        "style": style,
        "question": "What is {x} in {{braces}}?",
        "first": "An answer with {first} and {0} in it.",
        "second": "Another, 100% sure {second:>9}.",
        "scheme": LABEL_SCHEMES[scheme],
        "context": context,
    }
    assert render_messages(**args) == _as_before(**args)
