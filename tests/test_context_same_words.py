"""A context kind's item tells raters (on the task page) and LLM judges (in the prompt) the same
thing in the same words, with the answer it speaks of named by the label that answer has in that
vote: both display orders on the page; both display orders, both label orders and every label
scheme in the prompt. Every context kind, with the wording its rule writes."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotations import context as context_text
from annotations.models import Lease, Slot
from judges.prompts import LABEL_SCHEMES
from judges.runner import plan_units
from judges.services import judge_run_start
from perturbations.context_rules import context_rule
from perturbations.kinds import CONTEXT_KINDS
from tests.factories import make_llm_judge, make_question, make_study, make_variant, originals

pytestmark = pytest.mark.django_db

A1_TEXT = "Plants make their food from light, water and carbon dioxide."
A2_TEXT = "Green plants turn sunlight, water and air into sugar in their leaves."
FAMILY = "Claude"


def _neutral(text: str, *, a1: str, a2: str) -> str:
    """`text` with the two labels of this vote put back as the answers' names."""
    return re.sub(rf"\b({re.escape(a1)}|{re.escape(a2)})\b", lambda m: "{A1}" if m[1] == a1 else "{A2}", text)


def _expected(template: str, *, judge_family: str | None) -> str:
    return template.replace("{judge_family}", judge_family or context_text.NO_FAMILY).replace(
        "{other_family}", context_text.other_family(judge_family)
    )


@pytest.fixture
def items():
    """One question, and for every context kind its item: A1 against A2's text unchanged, with
    the context the kind's rule writes."""
    study = make_study(votes_per_item=4)
    question = make_question(study, a1=A1_TEXT, a2=A2_TEXT)
    a2 = originals(question)[1]
    made = {}
    for slug in sorted(CONTEXT_KINDS):
        context = context_rule(slug, 3, question.text).context
        variant = make_variant(question, kind=slug, text=a2.text, context=context)
        made[slug] = variant.question.items.get(kind__slug=slug)
    return study, made


def _task_page(study, item, shown_first: str) -> str:
    """The task page of a new rater (entered as raters do) who holds `item` in this display order."""
    client = Client()
    participant = f"P-{item.pk}-{shown_first}"
    client.post(reverse("annotations:landing", args=[study.slug]), {"participant_id": participant, "consent": "on"})
    rater = study.raters.get(participant_id=participant)
    Lease.objects.filter(rater=rater).delete()
    Lease.objects.create(
        study=study,
        rater=rater,
        item=item,
        question=item.question,
        token=f"t{item.pk}{shown_first}",
        shown_first=shown_first,
        expires_at=timezone.now() + timedelta(minutes=10),
    )
    return client.get(reverse("annotations:task", args=[study.slug])).content.decode()


def _page(study, item, shown_first: str) -> tuple[str, str]:
    """The context line of the task page as a reader sees it, and the label of the heading above
    A2's text."""
    page = _task_page(study, item, shown_first)
    line = re.search(r'<p id="task-context"[^>]*>(.*?)</p>', page, re.S)
    assert line, "no context line on the page"
    headings = re.findall(
        r'<h2 id="answer-\d-title" class="answer-title">(Answer \d) .*?</h2>\s*<div[^>]*>(.*?)</div>', page, re.S
    )
    a2_label = next(label for label, body in headings if A2_TEXT in html.unescape(body))
    return html.unescape(line[1]), a2_label


def _prompts(study, item) -> list[tuple[str, str, str, str]]:
    """Per vote of a run over every label scheme, with 4 votes per item (both display orders,
    both label orders): (the user message, A1's label, A2's label, display order)."""
    found = []
    for scheme in LABEL_SCHEMES:
        config = make_llm_judge(label_schemes=[scheme], votes_per_item=4, family=FAMILY)
        run = judge_run_start(study=study, judge=config.judge, enqueue=False)
        units, _done = plan_units(run, retry_failed=False)
        for unit in units:
            if unit.item_id != item.pk:
                continue
            user = unit.messages[-1]["content"]
            blocks = dict((body, label) for label, body in re.findall(r"\[(\w+)\]\n(.*?)\n\[end of \1\]", user, re.S))
            found.append((user, blocks[A1_TEXT], blocks[A2_TEXT], unit.planned.shown_first, unit.planned.label_order))
    return found


@pytest.mark.parametrize("slug", sorted(CONTEXT_KINDS))
def test_raters_and_llm_judges_read_the_same_context_naming_the_same_answer(items, slug):
    study, made = items
    item = made[slug]
    template = item.context
    seen = set()

    prompts = _prompts(study, item)
    assert {(order, labels) for *_, order, labels in prompts} == {(o, lo) for o in ("a1", "a2") for lo in ("ab", "ba")}
    assert len(prompts) == 4 * len(LABEL_SCHEMES)
    for user, a1_label, a2_label, _order, _labels in prompts:
        # The context sits between the question and the first answer, as one paragraph.
        line = re.search(r"\n\n(.*?)\n\n\[", user, re.S)[1]
        assert _neutral(line, a1=a1_label, a2=a2_label) == _expected(template, judge_family=FAMILY)
        assert a2_label in line
        seen.add(_neutral(line, a1=a1_label, a2=a2_label))

    if context_text.names_judge_family(template):
        # A person has no model family: raters are never handed this item.
        assert not Slot.objects.filter(item=item).exists()
        assert FAMILY in line and context_text.other_family(FAMILY) in line
        return
    assert Slot.objects.filter(item=item).count() == study.votes_per_item
    for shown_first in ("a1", "a2"):
        line, a2_label = _page(study, item, shown_first)
        a1_label = "Answer 2" if a2_label == "Answer 1" else "Answer 1"
        assert a2_label == ("Answer 1" if shown_first == "a2" else "Answer 2")
        assert _neutral(line, a1=a1_label, a2=a2_label) == _expected(template, judge_family=None)
        assert a2_label in line
        seen.add(_neutral(line, a1=a1_label, a2=a2_label))
    # Page and prompt: one wording, whatever the order and the labels.
    assert len(seen) == 1


def test_the_control_item_carries_no_context_in_either_place(items):
    study, _made = items
    control = study.items.get(kind__isnull=True)
    page = _task_page(study, control, "a2")
    assert "task-context" not in page
    config = make_llm_judge(votes_per_item=2, family=FAMILY)
    units, _ = plan_units(judge_run_start(study=study, judge=config.judge, enqueue=False), retry_failed=False)
    user = next(u.messages[-1]["content"] for u in units if u.item_id == control.pk)
    assert re.search(r"\?\n\n\[", user), "the first answer follows the question directly"


def test_a_context_is_escaped_on_the_page_and_left_as_written_in_the_prompt(items):
    study, made = items
    item = made["sycophancy"]
    item.answer_a2.context = "<b>I</b> & my friends think {A2} is <script>alert(1)</script> right."
    item.answer_a2.save()
    page = _task_page(study, item, "a1")
    assert "<script>alert(1)</script>" not in page and "<b>I</b>" not in page
    assert "&lt;b&gt;I&lt;/b&gt; &amp; my friends think Answer 2 is &lt;script&gt;" in page
