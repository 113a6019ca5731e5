"""Lists nested without bound ("+ " × 600 is 1.2 KB, and none of it counted towards the other
rendering bounds) made Python-Markdown recurse past Python's limit, so every page showing such
a text answered 500. Nesting is bounded now: such a text is refused, naming its field, on every
way in (admin forms, study files through the command and the API, vote files); stored anyway,
it is shown as escaped plain text; and if the renderer fails on any text, that text is shown
as plain text rather than failing the page."""

import inspect
import sys

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotations.models import Answer, Question, Study
from annotations.study_files import StudyFileError, study_import
from biasstudy.rendering import MAX_NESTING, nesting_depth, render_markdown, renders_as_markdown, validate_markdown
from tests.factories import make_question, make_study
from tests.test_admin_study_forms import question_data, study_data
from tests.test_analysis_import import GOOD_ROWS, write_csv
from tests.test_study_import import minimal_document, write

NESTED = {
    "bullets": "+ " * 600,
    "numbers": "1. " * 600,
    "dashes": "- " * 600 + "x",
    "indented": "".join(" " * (4 * level) + "- a\n" for level in range(60)),
}


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("plain text", 0),
        ("- a", 1),
        ("- - a", 2),
        ("> 1. - a", 3),
        (">> a", 2),
        ("    - a", 2),  # four spaces indent one level
        ("\t- a", 2),
        ("1) a", 1),
        ("-a and 3.14 are not markers", 0),
        ("a\n  > > b\nc", 2),
        ("+ " * 600, 600),
    ],
)
def test_the_nesting_depth_counts_indentation_and_the_markers_that_open_a_line(text, depth):
    assert nesting_depth(text) == depth


@pytest.mark.parametrize("text", NESTED.values(), ids=NESTED.keys())
def test_text_nested_too_deep_is_shown_as_escaped_plain_text(text):
    assert nesting_depth(text) > MAX_NESTING and not renders_as_markdown(text)
    html = render_markdown(text)
    assert html.startswith("<p>") and "<ul>" not in html and "<ol>" not in html


def test_lists_nested_as_deep_as_the_bound_still_render_as_lists():
    text = "".join(" " * (4 * level) + f"- level {level}\n" for level in range(MAX_NESTING))
    assert nesting_depth(text) == MAX_NESTING
    assert render_markdown(text).count("<ul>") == MAX_NESTING


def _called_near_the_recursion_limit(function, spare_frames: int):
    """function() called when only about `spare_frames` frames are left before RecursionError."""
    room = sys.getrecursionlimit() - len(inspect.stack(0)) - spare_frames

    def descend(levels: int):
        return function() if levels <= 0 else descend(levels - 1)

    return descend(room)


def test_a_text_the_renderer_fails_on_is_shown_as_plain_text_not_an_error():
    # A nested list within the bound, rendered where the stack has too little room for it: the
    # renderer raises RecursionError inside Python-Markdown, as "+ " × 600 did from any page.
    text = "+ " * MAX_NESTING + "<b>deep</b>"
    html = _called_near_the_recursion_limit(lambda: render_markdown(text), spare_frames=40)
    assert html == "<p>" + "+ " * MAX_NESTING + "&lt;b&gt;deep&lt;/b&gt;</p>"


@pytest.mark.parametrize("text", NESTED.values(), ids=NESTED.keys())
def test_the_validator_refuses_deep_nesting_and_says_why(text):
    with pytest.raises(ValidationError, match=f"nested {nesting_depth(text)} levels deep; at most {MAX_NESTING}"):
        validate_markdown(text)


def test_the_admin_refuses_study_instructions_nested_too_deep(staff_client):
    response = staff_client.post(reverse("admin:annotations_study_add"), study_data(instructions="+ " * 600))
    assert response.status_code == 200
    assert "nested 600 levels deep" in response.context["adminform"].form.errors["instructions"][0]
    assert not Study.objects.exists()


@pytest.mark.parametrize("field", ["text", "answer_a1", "answer_a2"])
def test_the_admin_question_form_refuses_a_text_nested_too_deep_by_field(staff_client, field):
    study = make_study()
    data = question_data(study, **{field: "1. " * 600})
    response = staff_client.post(reverse("admin:annotations_question_add"), data)
    assert response.status_code == 200
    assert "nested 600 levels deep" in response.context["adminform"].form.errors[field][0]
    assert not Question.objects.exists() and not Answer.objects.exists()


def test_a_study_file_with_an_answer_nested_too_deep_is_refused_naming_the_field(db, tmp_path):
    document = minimal_document()
    document["questions"][0]["answers"][1]["text"] = "+ " * 600
    with pytest.raises(StudyFileError, match=r"questions\[0\]\.answers\[1\]\.text: .*nested 600 levels deep"):
        study_import(path=write(tmp_path, document), fmt="biasstudy")
    assert not Study.objects.exists() and not Answer.objects.exists()


def test_the_api_refuses_a_study_whose_instructions_nest_too_deep(token_client):
    document = minimal_document(instructions="- " * 600 + "x")
    response = token_client.post("/api/v1/studies/", document, format="json")
    assert response.status_code == 400
    assert "instructions" in str(response.json()) and "nested 600 levels deep" in str(response.json())
    assert not Study.objects.exists()


def test_a_vote_file_with_an_answer_nested_too_deep_is_refused_naming_line_and_field(db, tmp_path):
    make_study(status="draft", slug="nested")
    rows = [list(row) for row in GOOD_ROWS]
    rows[0][2] = "+ " * 600  # answer_a1 of the first vote
    path = write_csv(tmp_path / "nested.csv", rows)
    with pytest.raises(CommandError, match=r"line 2, field 'answer_a1'.*nested 600 levels deep"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "nested", verbosity=0)
    assert not Question.objects.exists() and not Answer.objects.exists()


def test_pages_show_a_deeply_nested_text_stored_before_the_bound_as_plain_text(client, db):
    study = make_study(slug="stored")
    make_question(study)
    Study.objects.filter(pk=study.pk).update(instructions="+ " * 600)  # as a row written before the bound
    response = client.get(reverse("annotations:landing", args=["stored"]))
    assert response.status_code == 200
    assert ("+ " * 50) in response.content.decode()
