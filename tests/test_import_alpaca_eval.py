"""``import_votes --format alpaca_eval``: AlpacaEval's annotation files (.json, .json.gz, several
files or a folder) become one question per (model, instruction) with the baseline as A1, the
judge's fractional preference kept as the vote's probabilities; bad input is refused naming the
file and the record, and nothing is written."""

import gzip
import io
import json
import tracemalloc

import pytest
from django.core.management import CommandError, call_command

from analysis import lc_alpaca, loader
from annotations.models import Answer, Question, Vote
from tests.factories import make_study
from vote_imports import import_alpaca_eval
from vote_imports.importers import ImportProblem


def record(instruction="Say hi.", model="m1", preference=1.75, **fields):
    return {
        "instruction": instruction,
        "output_1": "Hi there, friend.",
        "generator_1": "base",
        "dataset": "koala",
        "output_2": "Hello!",
        "generator_2": model,
        "annotator": "judge-x",
        "preference": preference,
        "price_per_example": 0.01,
        **fields,
    }


def write(path, records, *, zipped=False):
    data = json.dumps(records).encode()
    path.write_bytes(gzip.compress(data) if zipped else data)
    return path


def run(*paths, slug="ae"):
    call_command("import_votes", *map(str, paths), "--format", "alpaca_eval", "--study", slug, verbosity=0)


def test_each_model_and_instruction_is_a_question_with_the_baseline_as_a1(db, tmp_path):
    study = make_study(status="draft", slug="ae")
    write(tmp_path / "m1.json", [record(), record("Count to 3.", preference=1.0)])
    write(tmp_path / "m2.json.gz", [record(model="m2", preference=1.5), record("Count to 3.", model="m2")], zipped=True)
    run(tmp_path / "m1.json", tmp_path / "m2.json.gz")
    assert sorted(Question.objects.filter(study=study).values_list("external_id", "subset")) == [
        ("m1#0", "m1"),
        ("m1#1", "m1"),
        ("m2#0", "m2"),
        ("m2#1", "m2"),
    ]
    a1 = Answer.objects.get(question__external_id="m2#0", external_id="m2#0-output_1")
    a2 = Answer.objects.get(question__external_id="m2#0", external_id="m2#0-output_2")
    assert (a1.system, a1.text, a1.len_chars) == ("base", "Hi there, friend.", 17)
    assert (a2.system, a2.text) == ("m2", "Hello!")
    votes = {v.item.question.external_id: v for v in Vote.objects.filter(item__study=study).select_related("judge")}
    assert {v.judge.name for v in votes.values()} == {"judge-x"}
    assert votes["m1#0"].choice == "a2" and votes["m1#0"].option_probs == {"first": 0.25, "second": 0.75, "tie": 0.0}
    assert votes["m1#1"].choice == "a1" and votes["m2#0"].choice == "tie"
    assert votes["m1#0"].meta == {
        "source": "m1.json",
        "record": 0,
        "dataset": "koala",
        "preference": 1.75,
        "price_per_example": 0.01,
        "order_known": False,
    }
    # The LC reads the probabilities back as soft labels, and one instruction across models.
    models, instructions, delta, y = lc_alpaca.frame_inputs(loader.study_frame(study).sort_values("question_ext"))
    assert list(models) == ["m1", "m1", "m2", "m2"]
    assert list(instructions) == ["0", "1", "0", "1"]
    assert list(y) == pytest.approx([0.75, 0.0, 0.5, 0.75])
    assert list(delta) == [6 - 17] * 4


def test_a_folder_is_every_annotation_file_under_it(db, tmp_path):
    study = make_study(status="draft", slug="ae")
    (tmp_path / "results" / "m2").mkdir(parents=True)
    write(tmp_path / "results" / "m1.json.gz", [record()], zipped=True)
    write(tmp_path / "results" / "m2" / "annotations.json", [record(model="m2")])
    (tmp_path / "results" / "notes.txt").write_text("not read")
    run(tmp_path / "results")
    assert Vote.objects.filter(item__study=study).count() == 2


@pytest.mark.parametrize(
    ("records", "where", "message"),
    [
        ([record(), record(preference=2.5)], "[1].preference", "not in [1, 2]"),
        ([record(), record(preference="2")], "[1].preference", "not a number"),
        ([record(), {k: v for k, v in record().items() if k != "output_2"}], "[1].output_2", "is missing"),
        ([record(), record(generator_1="other")], "[1].generator_1", "not the baseline"),
        ([record(), record()], "[1]", "already annotated 'm1' on this instruction (m1.json [0])"),
        ([record(), 3], "[1]", "must be a JSON object"),
        ([record(), record(output_2=None)], "[1].output_2", "must be text"),
    ],
)
def test_a_bad_record_is_refused_naming_the_file_and_the_record_and_nothing_is_written(
    db, tmp_path, records, where, message
):
    study = make_study(status="draft", slug="ae")
    write(tmp_path / "m1.json", records)
    with pytest.raises(CommandError) as caught:
        run(tmp_path / "m1.json")
    assert "nothing was written" in str(caught.value)
    assert f"m1.json, field '{where}'" in str(caught.value) and message in str(caught.value)
    assert not Question.objects.filter(study=study).exists() and not Vote.objects.filter(item__study=study).exists()


def test_every_bad_record_of_every_file_is_reported_at_once(db, tmp_path):
    make_study(status="draft", slug="ae")
    write(tmp_path / "a.json", [record(preference=3), record("Other", preference=None)])
    write(tmp_path / "b.json", [record(model="m2", annotator=7)])
    (tmp_path / "c.json.gz").write_bytes(b"not gzip")
    (tmp_path / "d.json").write_text("{broken")
    with pytest.raises(CommandError) as caught:
        run(tmp_path)
    text = str(caught.value)
    for part in (
        "a.json, field '[0].preference'",
        "b.json, field '[0].annotator'",
        "c.json.gz: cannot read",
        "d.json, line 1",
    ):
        assert part in text


def test_a_missing_preference_is_a_vote_without_a_choice_and_the_old_draw_code_a_tie(db, tmp_path):
    study = make_study(status="draft", slug="ae")
    write(tmp_path / "m1.json", [record(preference=None), record("Other", preference=0)])
    run(tmp_path / "m1.json")
    votes = sorted(Vote.objects.filter(item__study=study), key=lambda v: v.meta["record"])
    assert (votes[0].choice, votes[0].parse_status, votes[0].option_probs) == (None, "invalid", None)
    assert (votes[1].choice, votes[1].option_probs) == ("tie", {"first": 0.5, "second": 0.5, "tie": 0.0})


def test_other_formats_still_take_one_path(db, tmp_path):
    make_study(status="draft", slug="ae")
    with pytest.raises(CommandError, match="reads one file or folder"):
        call_command("import_votes", str(tmp_path), str(tmp_path), "--format", "csv", "--study", "ae")


@pytest.mark.parametrize(
    ("fields", "where", "message"),
    [
        ({"price_per_example": float("nan")}, "[1].price_per_example", "nan is not a number that can be stored"),
        ({"time_per_example": float("inf")}, "[1].time_per_example", "inf is not a number that can be stored"),
        ({"raw_completion": "a\x00b"}, "[1].raw_completion", "contains a NUL character"),
        ({"raw_completion": {"text": "\ud800"}}, "[1].raw_completion.text", "contains a lone surrogate (\\ud800)"),
        ({"output_2": "Hello \udc00!"}, "[1].output_2", "contains a lone surrogate (\\udc00)"),
        ({"dataset": ["koala", "\ud83d"]}, "[1].dataset[1]", "contains a lone surrogate"),
    ],
)
def test_a_value_no_database_can_store_is_refused_naming_the_record_and_the_field(db, tmp_path, fields, where, message):
    """NaN and Infinity (Python's json reads them), NUL and half a surrogate pair ("\\ud800")
    ended in the database's own error, with a traceback, instead of the import's message."""
    study = make_study(status="draft", slug="ae")
    write(tmp_path / "m1.json", [record(), record("Other", **fields)])
    with pytest.raises(CommandError) as caught:
        run(tmp_path / "m1.json")
    text = str(caught.value)
    assert "import failed, nothing was written" in text
    assert f"m1.json, field '{where}': {message}" in text
    assert not Question.objects.filter(study=study).exists() and not Vote.objects.filter(item__study=study).exists()


def test_a_records_own_source_and_record_fields_do_not_replace_where_the_vote_came_from(db, tmp_path):
    """The vote's meta says which file and which record it came from; a record's own `source`
    and `record` fields (a data set may have them) overwrote both. They are kept under their
    own names, and the import says so."""
    study = make_study(status="draft", slug="ae")
    write(tmp_path / "m1.json", [record(), record("Other", source="their-pipeline", record={"id": 7})])
    out = io.StringIO()
    call_command("import_votes", str(tmp_path / "m1.json"), "--format", "alpaca_eval", "--study", "ae", stdout=out)
    meta = Vote.objects.get(item__study=study, meta__record=1).meta
    assert (meta["source"], meta["record"]) == ("m1.json", 1)
    assert (meta["record.source"], meta["record.record"]) == ("their-pipeline", {"id": 7})
    assert "warnings:" in out.getvalue()
    assert "field 'source': each record's own 'source' field is kept in its vote's meta as 'record.source'" in (
        out.getvalue()
    )
    assert "field 'record': each record's own 'record' field is kept" in out.getvalue()


def test_a_compressed_file_is_read_as_a_stream_not_decompressed_whole(tmp_path):
    """A 400 MB .json.gz was decompressed whole (1 GB of memory). Reading the first records of
    a 48 MB one now holds about a chunk of it."""
    path = tmp_path / "big.json.gz"
    filler = "x" * 16_000
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("[")
        for n in range(3000):
            out.write(("," if n else "") + json.dumps(record(f"Question {n}?", raw_completion=filler)))
        out.write("]")
    tracemalloc.start()
    try:
        parsed = import_alpaca_eval.parse_alpaca_eval(path, limit=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(parsed.votes) == 3 and parsed.votes[2].meta["raw_completion"] == filler
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB held to read 3 records of 48 MB"


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_records_split_anywhere_between_chunks_are_read_whole(tmp_path, monkeypatch, chunk):
    """The stream is parsed chunk by chunk: a record, a number, a character of several bytes or
    the byte-order mark cut by a chunk's end is read as the whole file would be."""
    records = [
        record("Ça va ? 👋", preference=1.25, price_per_example=12345.678e-3),
        record("Zweite Frage — ß", model="m2", preference=2, time_per_example=7),
        record("x" * 300, model="m3", preference=1, raw_completion={"nested": [1, 2.5, None, True, "é"]}),
    ]
    path = tmp_path / "a.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(records, indent=2, ensure_ascii=False).encode())
    monkeypatch.setattr(import_alpaca_eval, "CHUNK", chunk)
    parsed = import_alpaca_eval.parse_alpaca_eval(path)
    assert [v.meta | {"q": v.question} for v in parsed.votes] == [
        {**{k: v for k, v in r.items() if k not in import_alpaca_eval.TEXTS}, "source": "a.json", "record": n}
        | {"q": f"{r['generator_2']}#{n}"}
        for n, r in enumerate(records)
    ]
    assert [q.text for q in parsed.questions.values()] == [r["instruction"] for r in records]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[\n  {"a": 1},\n  {"a": 2,,}\n]', "line 3: not JSON: Expecting property name"),
        ('[\n  {"a": 1}\n  {"a": 2}\n]', "line 3: not JSON: expected ',' or ']' after a record"),
        ('[\n  {"a": 1},\n', "line 3: not JSON: Expecting value"),
        ('[{"a": 1}', "line 1: not JSON: the file ends inside the list"),
        ('[{"a": 1}]\n\n[]', "line 3: not JSON: extra data after the list"),
        ('\n{"a": 1}', "line 2: expected a JSON list of annotation records"),
    ],
)
def test_text_that_is_not_a_json_list_is_refused_naming_the_line(tmp_path, monkeypatch, text, problem):
    path = tmp_path / "a.json"
    path.write_text(text)
    monkeypatch.setattr(import_alpaca_eval, "CHUNK", 4)
    with pytest.raises(ImportProblem) as caught:
        import_alpaca_eval.parse_alpaca_eval(path)
    assert f"a.json, {problem}" in str(caught.value)


def test_more_models_of_a_judge_the_study_has_are_added_and_what_it_has_is_recognised(db, tmp_path):
    """Another import of the same judge: its new model's votes are added, the votes the study has
    (the same judge, instruction and pair of systems, though numbered otherwise: the second
    import meets the instructions in another order) are recognised, and nothing doubles."""
    study = make_study(status="draft", slug="ae")
    first = write(tmp_path / "m1.json", [record(), record("Count to 3.", preference=1.0)])
    run(first)
    # m1 again, its instructions in the other order (so "#0" is another instruction), and m2.
    again = write(tmp_path / "again.json", [record("Count to 3.", preference=1.0), record()])
    new = write(tmp_path / "m2.json", [record("Count to 3.", model="m2", preference=1.25), record(model="m2")])
    out = io.StringIO()
    call_command("import_votes", str(again), str(new), "--format", "alpaca_eval", "--study", "ae", stdout=out)
    assert "2 votes, 0 repeats unlinked, 2 votes recognised" in out.getvalue()
    votes = Vote.objects.filter(item__study=study)
    assert votes.count() == 4 and votes.values("judge").distinct().count() == 1
    pairs = sorted(votes.values_list("item__answer_a2__system", "item__question__text", "option_probs__second"))
    assert pairs == [
        ("m1", "Count to 3.", 0.0),
        ("m1", "Say hi.", 0.75),
        ("m2", "Count to 3.", 0.25),
        ("m2", "Say hi.", 0.75),
    ]
    # The same files once more: everything recognised, nothing written.
    out = io.StringIO()
    call_command("import_votes", str(again), str(new), "--format", "alpaca_eval", "--study", "ae", stdout=out)
    assert "0 questions, 0 answers, 0 items, 0 judges, 0 raters, 0 votes" in out.getvalue()
    assert "4 votes recognised" in out.getvalue() and votes.count() == 4


def test_a_vote_the_study_has_with_another_verdict_is_refused_and_nothing_is_written(db, tmp_path):
    make_study(status="draft", slug="ae")
    run(write(tmp_path / "m1.json", [record()]))
    changed = write(tmp_path / "changed.json", [record(preference=1.25), record(model="m2")])
    with pytest.raises(
        CommandError, match=r"'judge-x' already voted on question 'm1#0' \(control\) in the study with another verdict"
    ):
        run(changed)
    assert Vote.objects.count() == 1 and not Question.objects.filter(subset="m2").exists()
