"""Bad input, generated (hypothesis): study files in both formats and the rater's entry and vote
requests. A study file either imports or fails with a StudyFileError that names the file and a
field or line, and a failure writes nothing; a rater request never gets a 5xx and an invalid
one stores nothing."""

from __future__ import annotations

import copy
import json
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotations.models import Answer, ComparisonItem, PerturbationKind, Question, Rater, Study, Vote
from annotations.study_files import StudyFileError, study_import
from tests.factories import make_question, make_study
from tests.test_study_import import minimal_document

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # the same examples on every run: a failure here is reproducible
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=40)
    | st.sampled_from(["", " ", "\x00", "remembering", "reference", "q1-a1", "x" * 5000, "collecting", "-1"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=8,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


@st.composite
def mutated(draw, base: dict) -> dict:
    """The document with one to three places replaced, removed or given an unexpected key."""
    document = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(document))
        path = draw(st.sampled_from(paths))
        operation = draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            if operation == "replace":
                document = draw(json_values)
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        if not isinstance(parent, (dict, list)):
            continue
        if operation == "replace":
            parent[path[-1]] = draw(json_values)
        elif operation == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=10))] = draw(json_values)
        else:
            parent.append(draw(json_values))
    return document


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Study, Question, Answer, ComparisonItem, PerturbationKind))


def _import_either_way(path: Path, fmt: str) -> None:
    before = _counts()
    with transaction.atomic():  # rolled back after each example: the next may use the same slug
        try:
            study = study_import(path=path, fmt=fmt)
        except StudyFileError as error:
            assert error.path.startswith(str(path)), error
            assert error.field or error.line or error.message, error
            for problem in error.problems:  # one, or "N problems:" and one line each
                assert str(problem).startswith(problem.path) and problem.path.startswith(str(path)), error
            assert _counts() == before, f"a failed import wrote something: {error}"
        else:
            assert study.pk
        transaction.set_rollback(True)


@FUZZ
@given(document=mutated(minimal_document()))
def test_a_fuzzed_biasstudy_document_imports_or_fails_cleanly(db, document):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "study.json"
        try:
            path.write_text(json.dumps(document), encoding="utf-8")
        except ValueError:
            return  # not representable as JSON at all
        _import_either_way(path, "biasstudy")


@FUZZ
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_arbitrary_bytes_as_a_study_file_fail_cleanly(db, raw):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "study.json"
        path.write_bytes(raw)
        _import_either_way(path, "biasstudy")


CHEN_RAW = {
    "question_id": "c1",
    "question": "Why is the sky blue?",
    "level": "Understanding",
    "model_id": "m",
    "answers": {
        "answer1": {"answer_id": "c1-a1", "answer": "Scattering."},
        "answer2": {"answer_id": "c1-a2", "answer": "Rayleigh scattering."},
    },
}
CHEN_REF = {
    "question_id": "c1-reference",
    "answers": {
        "answer1": {"answer_id": "c1-a1", "answer": "Scattering.", "perturb": False},
        "answer2": {"answer_id": "c1-a2xref", "answer": "Rayleigh scattering [1].", "perturb": True,
                    "perturb_model_id": "m", "raw_answer": "```error\n1. none\n```"},
    },
}  # fmt: skip


@FUZZ
@given(raw=mutated(CHEN_RAW), ref=mutated(CHEN_REF), extra_line=st.sampled_from(["", "\n", "{", "[]", "\n\n{}"]))
def test_fuzzed_chen2024_lines_import_or_fail_cleanly(db, raw, ref, extra_line):
    folder = Path(tempfile.mkdtemp())
    try:
        try:
            (folder / "raw.json").write_text(json.dumps(raw) + extra_line, encoding="utf-8")
            (folder / "reference.json").write_text(json.dumps(ref), encoding="utf-8")
        except ValueError:
            return
        _import_either_way(folder, "chen2024")
    finally:
        shutil.rmtree(folder)


# --------------------------------------------------------------------------- rater requests

_TOKEN = re.compile(r'name="token" value="([^"]+)"')
form_values = st.text(max_size=60) | st.sampled_from(
    ["first", "second", "tie", "on", "-1", "1e9", "99999999999999999999", "\x00"]
)


@pytest.fixture
def voting_rater(db):
    study = make_study(slug="fuzz", votes_per_item=3, target_per_rater=3)
    for _ in range(3):
        make_question(study)
    client = Client()
    assert client.post("/s/fuzz/", {"participant_id": "FZ1", "consent": "on"}).status_code == 302
    token = _TOKEN.search(client.get("/s/fuzz/task/").content.decode()).group(1)
    return client, token


@FUZZ
@given(
    body=st.dictionaries(st.sampled_from(["token", "choice", "not_familiar", "client_ms", "csrfmiddlewaretoken", "x"]),
                         form_values, max_size=5),
    use_real_token=st.booleans(),
    htmx=st.booleans(),
)  # fmt: skip
def test_a_fuzzed_vote_never_fails_the_server_and_an_invalid_one_stores_nothing(
    voting_rater, body, use_real_token, htmx
):
    client, token = voting_rater
    if use_real_token:
        body["token"] = token
        if body.get("choice") in ("first", "second", "tie"):
            body["choice"] = body["choice"] + "!"  # keep it invalid: a valid vote is checked below
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.post("/s/fuzz/task/", body, **headers)
    assert response.status_code < 500
    assert response.status_code in (200, 302, 400, 404), response.status_code
    if response.status_code == 302:  # a token that is no lease of theirs: back to their task, told so
        assert response["Location"].startswith("/s/fuzz/task/?notice="), response["Location"]
    assert not Vote.objects.exists()


def test_after_all_that_a_valid_vote_is_stored(voting_rater):
    client, token = voting_rater
    assert client.post("/s/fuzz/task/", {"token": token, "choice": "tie", "client_ms": "4000"}).status_code == 302
    assert Vote.objects.count() == 1


@FUZZ
@given(
    body=st.dictionaries(st.sampled_from(["participant_id", "target", "consent"]), form_values, max_size=3),
    query=st.dictionaries(st.sampled_from(["PROLIFIC_PID", "STUDY_ID", "workerId", "assignmentId", "hitId"]),
                          form_values, max_size=3),
)  # fmt: skip
def test_a_fuzzed_entry_never_fails_the_server_and_a_refused_one_creates_no_rater(db, body, query):
    study = Study.objects.filter(slug="entry-fuzz").first() or make_study(slug="entry-fuzz")
    before = Rater.objects.count()
    client = Client()
    response = client.post("/s/entry-fuzz/?" + urlencode(query), body)
    assert response.status_code in (200, 302, 400), response.status_code  # 200: an empty form shown again
    created = Rater.objects.count() - before
    if response.status_code == 302:
        # Accepted: a new rater, or (hypothesis reuses a participant id across examples in one
        # database) the same rater resuming.
        assert created in (0, 1) and Rater.objects.filter(study=study).exists()
    else:
        assert created == 0
    assert study.pk


def test_a_nul_character_is_refused_naming_where_it_is(db, tmp_path):
    document = minimal_document()
    document["questions"][0]["answers"][2]["inserted_errors"][0]["error"] = "Gr\x00een"
    path = tmp_path / "nul.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(StudyFileError, match="NUL") as error:
        study_import(path=path, fmt="biasstudy")
    assert error.value.field == "questions[0].answers[2].inserted_errors[0].error"
    assert not Study.objects.exists()


def test_a_lone_surrogate_is_refused_naming_where_it_is(db, tmp_path):
    """JSON may escape half a surrogate pair ("\\ud800"): not valid UTF-8, it crashed the render."""
    document = minimal_document()
    document["questions"][0]["answers"][1]["text"] = "Blue \ud800 sky."
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(document), encoding="utf-8")  # ensure_ascii: written as \ud800
    with pytest.raises(StudyFileError, match="surrogate") as error:
        study_import(path=path, fmt="biasstudy")
    assert error.value.field == "questions[0].answers[1].text"
    assert not Study.objects.exists()


def test_a_chen2024_question_id_that_is_not_a_string_is_a_clear_error(db, tmp_path):
    (tmp_path / "raw.json").write_text(json.dumps({**CHEN_RAW, "question_id": ["c1"]}), encoding="utf-8")
    with pytest.raises(StudyFileError) as error:
        study_import(path=tmp_path, fmt="chen2024")
    assert (error.value.field, error.value.line) == ("question_id", 1)
