"""Generated study documents over the whole biasstudy schema (settings, kinds, questions, answers,
variants, items, gold items), well-formed or with up to two corruptions anywhere in them (a value
replaced by any JSON value, a key removed or an unknown one added): every one is either imported
whole and consistent (its export imports back to the same study), or refused with a
StudyFileError naming the file, with nothing written."""

import json

from django.db import transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from annotations.models import Answer, BloomLevel, ComparisonItem, PerturbationKind, Question, Semantics, Study
from annotations.study_files import STUDY_FIELDS, StudyFileError, study_export, study_import

LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
)
ANY_JSON = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


# Text without NUL (a NUL is refused, and reached often enough through ANY_JSON).
CHARS = st.characters(blacklist_characters="\x00")
TEXT = st.text(CHARS, min_size=1, max_size=40)
CLEAN_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-1000, 1000), st.floats(-1e6, 1e6), st.text(CHARS, max_size=12)
)
# Every setting but slug and title, with values the model takes (mostly) or just past them.
SETTINGS = {
    "status": st.sampled_from(["draft", "collecting", "closed"]),
    "instructions": st.text(CHARS, max_size=20),
    "consent": st.text(CHARS, max_size=20),
    "votes_per_item": st.integers(min_value=0, max_value=12),
    "target_per_rater": st.integers(min_value=1, max_value=60),
    "min_response_ms": st.integers(min_value=0, max_value=5_000),
    "ms_per_word": st.integers(min_value=0, max_value=100),
    "lease_seconds": st.integers(min_value=30, max_value=3_600),
    "one_variant_per_question": st.booleans(),
    "completion_code": st.from_regex(r"[A-Z0-9]{0,12}", fullmatch=True),
    "per_rater_codes": st.booleans(),
    "fast_notice": st.booleans(),
    "allow_mturk_frame": st.booleans(),
    "prolific_completion_url": st.sampled_from(
        ["", "https://app.prolific.com/submissions/complete?cc=C1"] * 3 + ["no url"]
    ),
    "platform_completion_url": st.sampled_from(
        ["", "https://panel.example.org/done?token={code}", "https://panel.example.org/done"] * 2
        + ["no url", "https://panel.example.org/done?token={cod}"]
    ),
    "gold_every": st.integers(min_value=0, max_value=20),
    "gold_min_accuracy": st.floats(min_value=0, max_value=1.1),
    "max_length_ratio": st.floats(min_value=0.9, max_value=3),
}
assert set(SETTINGS) == set(STUDY_FIELDS) - {"slug", "title"}, "a new study setting needs a strategy here"
STUDY = st.fixed_dictionaries(
    {"slug": st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True), "title": TEXT}, optional=SETTINGS
)
KIND_SLUGS = ["factual_error", "reference", "gender", "sarcasm", "tone"]
KIND = st.fixed_dictionaries(
    {"slug": st.sampled_from(KIND_SLUGS[3:]), "semantics": st.sampled_from(Semantics.values)},
    optional={
        "name": TEXT,
        "description": st.text(CHARS, max_size=20),
        "steps": st.lists(st.sampled_from(KIND_SLUGS), max_size=2),
    },
)
ANSWER_IDS = ["a1", "a2", "v1", "v2", "v3"]
ERROR = st.fixed_dictionaries({"original": TEXT, "error": TEXT}, optional={"explanation": TEXT})
CHECKS = st.fixed_dictionaries({}, optional={"ok": st.booleans(), "warnings": st.lists(TEXT, max_size=2)})


def answer(answer_id: str, variant: bool) -> st.SearchStrategy:
    optional = {
        "provenance": st.dictionaries(st.text(CHARS, max_size=6), CLEAN_LEAF, max_size=2),
        "review_status": st.sampled_from(Answer.Review.values),
        "inserted_errors": st.lists(ERROR, max_size=2),
        "checks": CHECKS,
    }
    required = {"id": st.just(answer_id), "text": TEXT}
    if variant:
        required["derived_from"] = st.sampled_from(["a1", "a2", "a1", "a2", *ANSWER_IDS[2:]])
        required["kind"] = st.sampled_from(["factual_error", "reference", "gender", *KIND_SLUGS])
    return st.fixed_dictionaries(required, optional=optional)


ITEM = st.fixed_dictionaries(
    {
        "kind": st.sampled_from([None, *KIND_SLUGS]),
        "a1": st.sampled_from(ANSWER_IDS),
        "a2": st.sampled_from(ANSWER_IDS),
    }
)


@st.composite
def question(draw, qid: str) -> dict:
    variants = draw(st.integers(min_value=0, max_value=3))
    answers = [draw(answer("a1", False)), draw(answer("a2", False))]
    answers += [draw(answer(f"v{n}", True)) for n in range(1, variants + 1)]
    record = {
        "id": draw(st.just(qid)),
        "bloom": draw(st.sampled_from(BloomLevel.values)),
        "text": draw(TEXT),
        "answers": answers,
    }
    if draw(st.integers(min_value=0, max_value=3)) == 0:  # else derived from the answers
        record["items"] = [{"kind": None, "a1": "a1", "a2": "a2"}, *draw(st.lists(ITEM, max_size=2))]
    return record


GOLD = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["g1", "g2", "q1"]),
        "bloom": st.sampled_from(BloomLevel.values),
        "text": TEXT,
        "better": TEXT,
        "worse": TEXT,
    }
)


@st.composite
def documents(draw) -> dict:
    n = draw(st.sampled_from([1, 1, 2, 3, 0]))
    document = {
        "format": "biasstudy",
        "version": 1,
        "study": draw(STUDY),
        "questions": [draw(question(f"q{i}")) for i in range(1, n + 1)],
    }
    if draw(st.booleans()):
        document["perturbation_kinds"] = draw(st.lists(KIND, max_size=2))
    if draw(st.booleans()):
        document["gold_items"] = draw(st.lists(GOLD, max_size=2))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        corrupt(draw, document)
    return document


def corrupt(draw, document: dict) -> None:
    """Replace one value anywhere in the document, remove a key, or add an unknown one."""
    places = list(_containers(document))
    container = draw(st.sampled_from(places))
    keys = list(container) if isinstance(container, dict) else list(range(len(container)))
    action = draw(st.sampled_from(["replace", "remove", "add"]))
    if action == "add" or not keys:
        if isinstance(container, dict):
            container[draw(st.text(min_size=1, max_size=5))] = draw(ANY_JSON)
        else:
            container.append(draw(ANY_JSON))
        return
    key = draw(st.sampled_from(keys))
    if action == "remove":
        del container[key]
    else:
        container[key] = draw(ANY_JSON)


def _containers(node):
    if isinstance(node, (dict, list)):
        yield node
        for value in node.values() if isinstance(node, dict) else node:
            yield from _containers(value)


def assert_consistent(study: Study, document: dict) -> None:
    questions = document["questions"]
    gold = document.get("gold_items", [])
    assert study.slug == document["study"]["slug"]
    assert Question.objects.filter(study=study).count() == len(questions) + len(gold)
    assert Answer.objects.filter(question__study=study).count() == sum(len(q["answers"]) for q in questions) + 2 * len(
        gold
    )
    for item in ComparisonItem.objects.filter(study=study).select_related("answer_a1", "answer_a2"):
        assert item.answer_a1.question_id == item.answer_a2.question_id == item.question_id
        assert item.answer_a1_id != item.answer_a2_id
    controls = ComparisonItem.objects.filter(study=study, kind__isnull=True, question__is_gold=False).count()
    assert controls == len(questions)
    # Stored as the review page, the checks and the edit service read them.
    for stored in Answer.objects.filter(question__study=study):
        assert isinstance(stored.provenance, dict) and isinstance(stored.provenance.get("edits", []), list)
        assert isinstance(stored.checks, dict) and isinstance(stored.checks.get("ok", True), bool)
        assert all(isinstance(w, str) for w in stored.checks.get("warnings", []))
        assert all(isinstance(v, str) for e in stored.inserted_errors for v in e.values())
    for kind in PerturbationKind.objects.filter(study=study):
        assert isinstance(kind.name, str) and all(isinstance(step, str) for step in kind.steps)


def import_file(tmp_path, document, **overrides) -> Study:
    path = tmp_path / "study.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return study_import(path=path, fmt="biasstudy", **overrides)


def without_slug_and_kinds(exported: dict) -> dict:
    return {**exported, "study": {**exported["study"], "slug": None}, "perturbation_kinds": None}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=documents())
def test_a_generated_document_is_imported_consistently_or_refused_with_nothing_written(db, tmp_path, document):
    kinds_before = PerturbationKind.objects.count()
    savepoint = transaction.savepoint()
    try:
        try:
            study = import_file(tmp_path, document)
        except StudyFileError as refused:
            event(f"refused: {(refused.field or 'file').split('.')[0].split('[')[0]}")
            assert refused.message and "study.json" in str(refused)
            assert not Study.objects.exists() and not Question.objects.exists() and not Answer.objects.exists()
            assert PerturbationKind.objects.count() == kinds_before
            return
        event("imported")
        assert_consistent(study, document)
        exported = study_export(study=study)
        again = import_file(tmp_path, exported, slug="again")
        assert without_slug_and_kinds(study_export(study=again)) == without_slug_and_kinds(exported)
    finally:
        transaction.savepoint_rollback(savepoint)
