"""The files published with Chen et al. 2024 ("chen2024"), read into a biasstudy document."""

from __future__ import annotations

import re
from pathlib import Path

from annotations.models import BloomLevel, PerturbationKind
from annotations.study_files.decode import jsonl
from annotations.study_files.problems import Problems, StudyFileError
from annotations.study_files.validate import FORMAT_NAME, FORMAT_VERSION, shown

CHEN_CONTROL_FILE = "raw.json"
_BLOCK = re.compile(r"```(\w+)\s*\n(.*?)(?:```|\Z)", re.S)


def read_chen2024(path: Path) -> tuple[dict, None]:
    """The folder published with Chen et al. 2024: raw.json (control pairs) and one JSON Lines
    file per perturbation, named after the perturbation kind (factual_error.json, ...).

    In each perturbation file one answer is a perturbed copy of a raw answer; its answer_id is
    the original's plus four characters, which is how we find which original it came from (it
    may sit in either slot, and the slot differs between files for the same question).
    """
    folder = Path(path)
    if not folder.is_dir():
        raise StudyFileError(folder, "expected the folder that holds raw.json and the perturbation files")
    control = folder / CHEN_CONTROL_FILE
    if not control.exists():
        raise StudyFileError(control, "missing: the control file raw.json is required")
    known_kinds = set(PerturbationKind.objects.values_list("slug", flat=True))
    questions: dict[str, dict] = {}
    answers_by_id: dict[str, tuple[str, dict]] = {}
    problems = Problems()  # each line is read on its own: the report names every bad line
    for line_no, row in jsonl(control, problems):
        problems.check(_read_chen_control, control, line_no, row, questions, answers_by_id)

    for file in sorted(folder.glob("*.json")):
        if file.name == CHEN_CONTROL_FILE:
            continue
        kind = file.stem
        if kind not in known_kinds:
            problems.add(StudyFileError(file, f"no perturbation kind {kind!r}: the file name must be a kind's slug"))
            continue
        seen: set[str] = set()
        for line_no, row in jsonl(file, problems):
            problems.check(_read_chen_perturbation, file, line_no, row, kind, questions, answers_by_id, seen)
    problems.raise_any()

    document = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "study": {
            "slug": "chen2024",
            "title": "Humans or LLMs as the Judge? (Chen et al. 2024) items",
            "status": "draft",
            "instructions": "Compare the two answers to the question and choose the better one, or a tie.",
            "votes_per_item": 6,
        },
        "perturbation_kinds": [],
        "questions": list(questions.values()),
    }
    return document, None


def _read_chen_control(control: Path, line_no: int, row: dict, questions: dict, answers_by_id: dict) -> None:
    for key in ("question_id", "question", "level", "answers"):
        if key not in row:
            raise StudyFileError(control, "missing field", line=line_no, field=key)
    qid = row["question_id"]
    if not isinstance(qid, str) or not qid:
        raise StudyFileError(control, "must be a non-empty string", line=line_no, field="question_id")
    if qid in questions:
        raise StudyFileError(control, f"duplicate question id {qid!r}", line=line_no, field="question_id")
    level = str(row["level"]).lower()
    if level not in BloomLevel.values:
        raise StudyFileError(control, f"unknown Bloom level {row['level']!r}", line=line_no, field="level")
    answers = []
    for slot in ("answer1", "answer2"):
        answer = row["answers"].get(slot) if isinstance(row["answers"], dict) else None
        if (
            not isinstance(answer, dict)
            or not isinstance(answer.get("answer_id"), str)
            or not answer["answer_id"]
            or not isinstance(answer.get("answer"), str)
        ):
            raise StudyFileError(control, "missing answer or answer_id", line=line_no, field=f"answers.{slot}")
        aid = answer["answer_id"]
        if aid in answers_by_id or any(aid == a["id"] for a in answers):
            raise StudyFileError(
                control, f"duplicate answer id {aid!r}", line=line_no, field=f"answers.{slot}.answer_id"
            )
        answers.append({"id": aid, "text": answer["answer"], "provenance": _chen_provenance(row, None)})
    for record in answers:  # a line is taken whole or not at all
        answers_by_id[record["id"]] = (qid, record)
    questions[qid] = {"id": qid, "bloom": level, "text": row["question"], "answers": answers}


def _read_chen_perturbation(
    file: Path, line_no: int, row: dict, kind: str, questions: dict, answers_by_id: dict, seen: set
) -> None:
    for key in ("question_id", "answers"):
        if key not in row:
            raise StudyFileError(file, "missing field", line=line_no, field=key)
    if not isinstance(row["question_id"], str):
        raise StudyFileError(file, "must be a string", line=line_no, field="question_id")
    if not isinstance(row["answers"], dict):
        raise StudyFileError(file, "must be an object with answer1 and answer2", line=line_no, field="answers")
    qid = row["question_id"].removesuffix(f"-{kind}")
    if qid not in questions:
        raise StudyFileError(file, f"question {qid!r} is not in raw.json", line=line_no, field="question_id")
    if qid in seen:
        raise StudyFileError(file, f"duplicate question id {qid!r}", line=line_no, field="question_id")
    seen.add(qid)
    perturbed = [(slot, a) for slot, a in row["answers"].items() if isinstance(a, dict) and a.get("perturb")]
    if len(perturbed) != 1:
        raise StudyFileError(
            file, f"expected exactly one perturbed answer, found {len(perturbed)}", line=line_no, field="answers"
        )
    slot, answer = perturbed[0]
    aid = answer.get("answer_id") or ""
    if not isinstance(aid, str):
        raise StudyFileError(file, "must be a string", line=line_no, field=f"answers.{slot}.answer_id")
    original_id = aid[:-4]
    owner = answers_by_id.get(original_id)
    if len(aid) <= 4 or owner is None or owner[0] != qid:
        raise StudyFileError(
            file,
            f"the original of perturbed answer {aid!r} (id {original_id!r}) is not an answer of {qid!r} in raw.json",
            line=line_no,
            field=f"answers.{slot}.answer_id",
        )
    if aid in answers_by_id:
        raise StudyFileError(file, f"duplicate answer id {aid!r}", line=line_no, field=f"answers.{slot}.answer_id")
    if not isinstance(answer.get("answer"), str) or not answer["answer"].strip():
        raise StudyFileError(file, "missing answer text", line=line_no, field=f"answers.{slot}.answer")
    variant = {
        "id": aid,
        "text": answer["answer"].strip(),
        "derived_from": original_id,
        "kind": kind,
        "provenance": _chen_provenance(row, answer),
        "review_status": "approved",
    }
    raw_answer = answer.get("raw_answer") or ""
    if not isinstance(raw_answer, str):
        raise StudyFileError(
            file, f"must be text, got {shown(raw_answer)}", line=line_no, field=f"answers.{slot}.raw_answer"
        )
    errors = _chen_inserted_errors(raw_answer)
    if errors:
        variant["inserted_errors"] = errors
    answers_by_id[aid] = (qid, variant)
    questions[qid]["answers"].append(variant)


def _chen_provenance(row: dict, answer: dict | None) -> dict:
    if answer is None:
        return {
            "method": "import",
            "source": "chen2024",
            "model": row.get("model_id"),
            "temperature": row.get("temperature"),
        }
    return {
        "method": "import",
        "source": "chen2024",
        "model": answer.get("perturb_model_id"),
        "prompt": answer.get("perturb_prompt"),
    }


def _chen_inserted_errors(raw_output: str) -> list[dict]:
    """The ```error block of the perturbing model's output: one numbered line per error."""
    for name, body in _BLOCK.findall(raw_output):
        if name.lower() == "error":
            lines = [re.sub(r"^\s*\d+[.)]\s*", "", line).strip() for line in body.splitlines()]
            return [{"description": line} for line in lines if line]
    return []
