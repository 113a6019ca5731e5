"""A study's frozen instruction difficulty for the AlpacaEval-compatible LC (analysis.lc_alpaca,
"Frozen difficulty"), kept in ``AlpacaDifficulty``, one per study and judge: what
``study_lc_alpaca`` (``analyze --lc alpaca_eval``) scores every model against.

- The first time a judge's LC is computed in a study, its difficulty is fitted on the models
  present (the joint fit, with lc_alpaca's constants) and frozen.
- ``alpaca_difficulty_refit`` fits it again on the models present now (``analyze --lc
  alpaca_eval --refit-difficulty``; the admin's action "Refit the frozen difficulty").
- ``alpaca_difficulty_load`` freezes one read from a file (``--load-difficulty FILE``), as
  written by ``alpaca_difficulty_export`` (``--save-difficulty FILE``): a JSON object with the
  model's fields (``DIFFICULTY_FIELDS``), the difficulty keyed by instruction prompt key.

Every LC figure names its difficulty's source (``AlpacaLC.difficulty_source``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from django.db import IntegrityError, transaction
from django.utils import timezone

from analysis import lc_alpaca, loader
from analysis.frame import Filters, apply_filters, by_judge
from analysis.models import AlpacaDifficulty
from annotations.models import Question, Study

# The fields of a difficulty file, each with what it must be.
DIFFICULTY_FIELDS = {
    "judge": "the judge's name",
    "difficulty": "an object: instruction prompt key → its difficulty (a number)",
    "common_slope": "a number",
    "slope_penalty": "a number ≥ 0",
    "slope_pooling": "a number ≥ 0",
    "difficulty_ridge": "a number ≥ 0",
    "fitted_models": "a list of model names",
}


class DifficultyFileError(ValueError):
    """A difficulty file that cannot be read, naming the file and the field."""


def _inputs(study: Study, votes):
    keys = dict(Question.objects.filter(study=study).exclude(prompt_key="").values_list("external_id", "prompt_key"))
    return lc_alpaca.frame_inputs(votes, prompt_keys=keys)


def _counted_by_judge(study: Study, filters: Filters | None) -> dict:
    counted, _, _ = apply_filters(loader.study_frame(study), filters or Filters())
    return {judge: votes for judge, votes in by_judge(counted).items() if len(votes)}


def _frozen(row: AlpacaDifficulty) -> lc_alpaca.FrozenDifficulty:
    return lc_alpaca.FrozenDifficulty(
        difficulty=row.difficulty,
        common_slope=row.common_slope,
        slope_penalty=row.slope_penalty,
        slope_pooling=row.slope_pooling,
        difficulty_ridge=row.difficulty_ridge,
        models=row.fitted_models,
    )


def describe(row: AlpacaDifficulty) -> str:
    """The difficulty's source as the report names it."""
    return (
        f"frozen {row.fitted_at:%Y-%m-%d %H:%M} UTC, {row.source}: {len(row.difficulty)} instructions, "
        f"{len(row.fitted_models)} models, slope pooling {row.slope_pooling:g}, difficulty ridge {row.difficulty_ridge:g}"
    )


def _fitted(study: Study, judge: str, inputs) -> AlpacaDifficulty:
    result = lc_alpaca.fit(*inputs)
    frozen = lc_alpaca.FrozenDifficulty.from_fit(
        result, slope_pooling=lc_alpaca.SLOPE_POOLING, difficulty_ridge=lc_alpaca.DIFFICULTY_RIDGE
    )
    return _row(study, judge, frozen, source=f"fitted on the {len(frozen.models)} models the study had")


def _row(study: Study, judge: str, frozen: lc_alpaca.FrozenDifficulty, *, source: str) -> AlpacaDifficulty:
    return AlpacaDifficulty(
        study=study,
        judge=judge,
        difficulty=frozen.difficulty,
        common_slope=frozen.common_slope,
        slope_penalty=frozen.slope_penalty,
        slope_pooling=frozen.slope_pooling,
        difficulty_ridge=frozen.difficulty_ridge,
        fitted_models=frozen.models,
        source=source[:300],
        fitted_at=timezone.now(),
    )


def study_lc_alpaca(*, study: Study, filters: Filters | None = None) -> dict[str, lc_alpaca.AlpacaLC]:
    """Per judge, every model's LC scored against the judge's frozen difficulty, frozen now
    (fitted on these votes) when the study has none for the judge."""
    out = {}
    for judge, votes in _counted_by_judge(study, filters).items():
        inputs = _inputs(study, votes)
        row = AlpacaDifficulty.objects.filter(study=study, judge=judge).first()
        if row is None:
            row = _fitted(study, judge, inputs)
            try:
                with transaction.atomic():
                    row.save()
            except IntegrityError:  # frozen by another request meanwhile: that one is kept
                row = AlpacaDifficulty.objects.get(study=study, judge=judge)
        out[judge] = lc_alpaca.score(*inputs, frozen=_frozen(row), source=describe(row))
    return out


def alpaca_difficulty_refit(
    *, study: Study, judge: str | None = None, filters: Filters | None = None
) -> list[AlpacaDifficulty]:
    """Fit the difficulty again on the models the study has now, for one judge or every judge
    with votes, replacing the frozen one. Returns the new rows."""
    fitted = [
        _fitted(study, name, _inputs(study, votes))
        for name, votes in _counted_by_judge(study, filters).items()
        if judge is None or name == judge
    ]
    if judge is not None and not fitted:
        raise ValueError(f"study {study.slug!r} has no counted votes of judge {judge!r} to fit a difficulty on")
    with transaction.atomic():
        AlpacaDifficulty.objects.filter(study=study, judge__in=[row.judge for row in fitted]).delete()
        AlpacaDifficulty.objects.bulk_create(fitted)
    return fitted


def alpaca_difficulty_export(*, difficulty: AlpacaDifficulty) -> dict:
    """The frozen difficulty as the JSON object a file holds (``alpaca_difficulty_load``)."""
    return {name: getattr(difficulty, name) for name in DIFFICULTY_FIELDS}


def alpaca_difficulty_load(*, study: Study, path: Path) -> AlpacaDifficulty:
    """Freeze the difficulty of a file (``alpaca_difficulty_export``'s object) for its judge in
    ``study``, replacing the one it had. A file that is not such an object raises
    DifficultyFileError naming the field; nothing is written then."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DifficultyFileError(f"{path}: cannot read a JSON object ({exc})") from None
    frozen, judge = _checked(data, path)
    row = _row(study, judge, frozen, source=f"loaded from {Path(path).name}")
    with transaction.atomic():
        AlpacaDifficulty.objects.filter(study=study, judge=judge).delete()
        row.save()
    return row


def _checked(data, path) -> tuple[lc_alpaca.FrozenDifficulty, str]:
    def bad(field: str) -> DifficultyFileError:
        return DifficultyFileError(f"{path}: {field!r} must be {DIFFICULTY_FIELDS[field]}")

    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    if not isinstance(data, dict):
        raise DifficultyFileError(f"{path}: expected a JSON object with {', '.join(DIFFICULTY_FIELDS)}")
    for field in DIFFICULTY_FIELDS:
        if field not in data:
            raise DifficultyFileError(f"{path}: {field!r} is missing")
    if not isinstance(data["judge"], str) or not data["judge"].strip() or len(data["judge"]) > 120:
        raise bad("judge")
    gamma = data["difficulty"]
    if not isinstance(gamma, dict) or not gamma or not all(number(v) for v in gamma.values()):
        raise bad("difficulty")
    if not number(data["common_slope"]):
        raise bad("common_slope")
    for field in ("slope_penalty", "slope_pooling", "difficulty_ridge"):
        if not number(data[field]) or data[field] < 0:
            raise bad(field)
    if not isinstance(data["fitted_models"], list) or not all(isinstance(m, str) for m in data["fitted_models"]):
        raise bad("fitted_models")
    frozen = lc_alpaca.FrozenDifficulty(
        difficulty={str(k): float(v) for k, v in gamma.items()},
        common_slope=float(data["common_slope"]),
        slope_penalty=float(data["slope_penalty"]),
        slope_pooling=float(data["slope_pooling"]),
        difficulty_ridge=float(data["difficulty_ridge"]),
        models=list(data["fitted_models"]),
    )
    return frozen, data["judge"].strip()
