"""`import_votes` and the export commands answer a broken file or destination with a message
naming file, line and field (a CommandError), never a traceback; and import nothing."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from annotations.models import Answer, Question, Rater, Vote
from tests.factories import make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv

COLUMNS = {"question_id": 0, "question": 1, "answer_a1": 2, "judge": 4, "rater": 6, "response_ms": 11}


def rows(line: int | None = None, column: str | None = None, value: str = "") -> list[list[str]]:
    """GOOD_ROWS with one value changed (`line` counts the header as line 1)."""
    changed = [list(row) for row in GOOD_ROWS]
    if line is not None:
        changed[line - 2][COLUMNS[column]] = value
    return changed


def import_votes(path, study="votes"):
    call_command("import_votes", str(path), "--format", "csv", "--study", study, verbosity=0)


def nothing_imported() -> bool:
    return not Vote.objects.exists() and not Question.objects.exists() and not Answer.objects.exists()


@pytest.fixture
def study(db):
    return make_study(status="draft", slug="votes")


def refused(path) -> str:
    with pytest.raises(CommandError) as caught:
        import_votes(path)
    return str(caught.value)


def test_a_file_that_is_not_utf8_names_the_line_of_the_first_bad_byte(study, tmp_path):
    path = write_csv(tmp_path / "votes.csv", rows())
    data = path.read_bytes().splitlines(keepends=True)
    data[3] = data[3].replace(b"Rayleigh", b"Rayl\xe9igh")
    path.write_bytes(b"".join(data))
    assert f"{path}, line 4: not UTF-8 text" in refused(path)
    assert nothing_imported()


def test_a_bad_byte_in_the_header_is_a_message_too(study, tmp_path):
    path = tmp_path / "votes.csv"
    path.write_bytes(b"question_id,qu\xffestion\r\nq1,x\r\n")
    assert f"{path}, line 1: not UTF-8 text" in refused(path)


def test_a_utf8_byte_order_mark_is_read_as_spreadsheets_write_it(study, tmp_path):
    path = write_csv(tmp_path / "votes.csv", rows())
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    import_votes(path)
    assert Vote.objects.count() == len(GOOD_ROWS)


@pytest.mark.parametrize(
    ("line", "column", "value", "message"),
    [
        (2, "answer_a1", "x" * (128 * 1024 + 1), "line 2, field 'answer_a1': longer than 131,072 characters"),
        (3, "question", "y" * (300 * 1024), "line 3, field 'question': longer than 131,072 characters"),
        (2, "response_ms", "²", "line 2, field 'response_ms': '²' is not a whole number"),
        (3, "response_ms", "٣٠٠٠", "line 3, field 'response_ms'"),
        (2, "response_ms", "9" * 30, "line 2, field 'response_ms'"),
        (4, "question_id", "q" * 121, "line 4, field 'question_id': at most 120 characters, got 121"),
        (2, "rater", "r" * 129, "line 2, field 'rater': at most 128 characters"),
        (3, "judge", "j" * 121, "line 3, field 'judge': at most 120 characters"),
        (5, "question_id", "q" * 118, "line 5, field 'answer_a1_id': at most 120 characters"),  # q…-a1
        (2, "answer_a1", "Rayleigh\x00scattering.", "line 2, field 'answer_a1': contains a NUL character"),
        (4, "judge", "gpt\x00x", "line 4, field 'judge': contains a NUL character"),
    ],
)
def test_a_bad_field_names_file_line_and_field_and_imports_nothing(study, tmp_path, line, column, value, message):
    path = write_csv(tmp_path / "votes.csv", rows(line, column, value))
    assert f"{path}, {message}" in refused(path)
    assert nothing_imported()


def test_an_unclosed_quote_is_a_message_with_a_line(study, tmp_path):
    path = tmp_path / "votes.csv"
    path.write_text('question_id,question,answer_a1,answer_a2,judge,winner\nq1,"Why,a,b,j,a1\n' + "x" * 20_000_000)
    assert f"{path}, line 2: not readable as CSV" in refused(path)


def test_a_quoted_field_holding_rows_is_imported_and_named_in_the_warnings_with_its_lines(study, tmp_path):
    """A quote left open until a later quote closes it is legal CSV: one vote whose question is
    two rows. Reading cannot tell it from a question with a line break and commas in it, so it
    is imported, and the import's result names it with its lines."""
    path = tmp_path / "votes.csv"
    path.write_text(
        "question_id,question,answer_a1,answer_a2,judge,winner\n"
        'q1,"What is 2+2?,Four,Five,judge,a1\n'
        'q2,What is 3+3?",Six,Seven,judge,a1\n'
        'q3,"Name a colour, please.\nAny one.",Red,Blue,judge,a2\n'
    )
    out = io.StringIO()
    call_command("import_votes", str(path), "--format", "csv", "--study", "votes", stdout=out)
    assert Question.objects.get(external_id="q1").text == "What is 2+2?,Four,Five,judge,a1\nq2,What is 3+3?"
    assert Vote.objects.count() == 2
    # Named once, with the lines of the row it swallowed; a line break with a comma or two is not.
    assert out.getvalue().count("warnings:") == 1 and out.getvalue().count("a quoted field spans") == 1
    assert (
        f"{path}, line 2, field 'question': a quoted field spans lines 2-3 and holds 5 commas, as many as a row has"
        in out.getvalue()
    )


def test_a_rater_met_again_in_a_later_file_is_refused_naming_the_line(study, tmp_path):
    import_votes(write_csv(tmp_path / "first.csv", rows()))
    later = [list(row) for row in GOOD_ROWS]
    for row in later:
        row[COLUMNS["judge"]] = "second-panel"  # another judge, the same rater ids p1, p2
    path = write_csv(tmp_path / "second.csv", later)
    assert "second.csv, line 2, field 'rater': rater 'p1' already voted on this item" in refused(path)
    assert Vote.objects.count() == len(GOOD_ROWS) and Rater.objects.count() == 2


def test_mtbench_json_lines_that_are_not_objects_or_too_deep_are_messages(study, tmp_path):
    (tmp_path / "human.csv").write_text("question_id,model_a,model_b,winner,judge,turn\n", encoding="utf-8")
    (tmp_path / "model_answers.jsonl").write_text("", encoding="utf-8")
    for line, problem in (("[1, 2]", "each line must be a JSON object"), ("[" * 100_000, "not JSON")):
        (tmp_path / "question.jsonl").write_text(
            json.dumps({"question_id": 1, "category": "math", "turns": ["Hi?"]}) + "\n" + line, encoding="utf-8"
        )
        with pytest.raises(CommandError, match=rf"question\.jsonl, line 2: {problem}"):
            call_command("import_votes", str(tmp_path), "--format", "mtbench", "--study", "votes")


@pytest.mark.parametrize("command", ["export_votes", "export_items", "export_metrics"])
def test_an_export_to_a_folder_that_does_not_exist_is_a_message(study, command):
    with pytest.raises(CommandError, match=r"/nonexistent/x\.csv: cannot write there \(No such file or directory\)"):
        call_command(command, "--study", "votes", "-o", "/nonexistent/x.csv")


def test_an_export_onto_a_folder_is_a_message_and_leaves_no_part_file(study, tmp_path):
    (tmp_path / "x.csv").mkdir()
    with pytest.raises(CommandError, match=r"x\.csv: cannot write there"):
        call_command("export_votes", "--study", "votes", "-o", str(tmp_path / "x.csv"))
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]
