"""A study's frozen style scaling (analysis.models.StyleScaling): read, made on first use, and
recomputed only on request (the admin's action, ``manage.py analyze --refresh-style-scaling``)."""

from __future__ import annotations

import pandas as pd
from django.db import transaction

from analysis import loader, ratings
from analysis.frame import Filters, apply_filters
from analysis.models import StyleScaling
from annotations.models import Study


def scaling_from_votes(frame: pd.DataFrame) -> ratings.Scaling | None:
    """The scaling of the counted votes (default filters) between named systems, every judge's
    together; None where no vote compares two systems with known style counts."""
    counted, _, _ = apply_filters(frame, Filters())
    found = ratings.battles(counted)
    if not len(found):
        return None
    return ratings.scaling_of(found.diff)


def study_style_scaling(*, study: Study, frame: pd.DataFrame) -> ratings.Scaling | None:
    """The study's frozen scaling; on first use computed from ``frame`` (the study's votes) and
    stored. Storing it moves no data version: the report that asked for it is computed with it."""
    stored = StyleScaling.objects.filter(study=study).first()
    if stored is not None:
        return ratings.Scaling.from_dict(stored.scaling)
    found = scaling_from_votes(frame)
    if found is not None:
        StyleScaling.objects.get_or_create(study=study, defaults={"scaling": found.as_dict()})
    return found


def study_style_scaling_refresh(*, study: Study) -> ratings.Scaling | None:
    """Recompute the study's scaling from its votes now (every style-controlled rating moves),
    and move its data version so that stored reports are computed again."""
    found = scaling_from_votes(loader.study_frame(study))
    with transaction.atomic():
        if found is None:
            StyleScaling.objects.filter(study=study).delete()
        else:
            StyleScaling.objects.update_or_create(study=study, defaults={"scaling": found.as_dict()})
        Study.objects.filter(pk=study.pk).data_changed()
    return found
