"""A study file read into a validated biasstudy document, in one of the READERS' formats: what the
admin's upload previews and what `write.study_import` writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from annotations.models import Answer, Study, items_reachable, target_lowered_message
from annotations.study_files.chen2024 import read_chen2024
from annotations.study_files.decode import loads, read_text
from annotations.study_files.problems import StudyFileError
from annotations.study_files.validate import Locator, derive_items, study_document_validate


def read_biasstudy(path: Path) -> tuple[dict, Locator]:
    text = read_text(path)
    document = loads(text, path)
    if not isinstance(document, dict):
        raise StudyFileError(path, "the document must be a JSON object", line=1)
    return document, Locator(text)


READERS: dict[str, Callable[[Path], tuple[dict, Locator | None]]] = {
    "biasstudy": read_biasstudy,
    "chen2024": read_chen2024,
}


def study_file_read(
    *, path: str | Path, fmt: str, slug: str | None = None, title: str | None = None, status: str | None = None
) -> dict:
    """Read and validate a study file, with the command's overrides; write nothing. The admin's
    upload shows this document as its preview before the same file is imported."""
    if fmt not in READERS:
        raise StudyFileError(path, f"unknown format {fmt!r} (one of {', '.join(READERS)})")
    document, locator = READERS[fmt](Path(path))
    overrides = {key: value for key, value in (("slug", slug), ("title", title), ("status", status)) if value}
    if isinstance(document.get("study"), dict):
        document["study"].update(overrides)
    study_document_validate(document, path=path, locator=locator)
    if Study.objects.filter(slug=document["study"]["slug"]).exists():
        raise StudyFileError(
            path,
            f"a study with slug {document['study']['slug']!r} exists already (choose another with --slug)",
            field="study.slug",
        )
    document["notes"] = [note for note in [_target_reachable(document)] if note]
    return document


def _target_reachable(document: dict) -> str | None:
    """Lower the study's target (the file's, or the default) to the most items one rater can
    get from this file, as Study.target_reachable does for a saved study; the warning to show,
    or None. A target nobody can reach is never imported to fail the study's next save."""
    study = document["study"]
    by_question = study.get("one_variant_per_question", Study._meta.get_field("one_variant_per_question").default)
    regular = 0
    for record in document["questions"]:
        approved = {a["id"] for a in record["answers"] if a.get("review_status", Answer.Review.APPROVED) == "approved"}
        listed = record.get("items")
        items = listed if listed is not None else derive_items(record)
        shown = sum(1 for item in items if item["a1"] in approved and item["a2"] in approved)
        regular += min(shown, 1) if by_question else shown
    gold_every = study.get("gold_every", Study._meta.get_field("gold_every").default)
    most = items_reachable(regular=regular, gold=len(document.get("gold_items", [])), gold_every=gold_every)
    target = study.get("target_per_rater", Study._meta.get_field("target_per_rater").default)
    if not most or target <= most:
        return None
    study["target_per_rater"] = most
    return target_lowered_message(target, most)
