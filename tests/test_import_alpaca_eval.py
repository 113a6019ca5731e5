"""``import_votes --format alpaca_eval``: AlpacaEval's annotation files (.json, .json.gz, several
files or a folder) become one question per (model, instruction) with the baseline as A1, the
judge's fractional preference kept as the vote's probabilities; bad input is refused naming the
file and the record, and nothing is written."""

import gzip
import json

import pytest
from django.core.management import CommandError, call_command

from analysis import lc_alpaca, loader
from annotations.models import Answer, Question, Vote
from tests.factories import make_study


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
