"""What other apps' pages show of Prolific, read in one query: the rater monitor's Prolific
column (templates/analysis/raters.html), without the analysis app knowing of this one."""

from __future__ import annotations

from django import template

from annotations.models import Study
from prolific.models import ProlificSubmission

register = template.Library()


@register.simple_tag
def prolific_statuses(study: Study) -> dict[int, str]:
    """Each rater's Prolific submission status by rater id, as the last sync saw it; empty for
    a study with no Prolific study."""
    rows = ProlificSubmission.objects.filter(prolific_study__study=study, rater__isnull=False)
    return dict(rows.order_by("synced_at").values_list("rater_id", "status"))


@register.simple_tag
def prolific_submission_ids(study: Study) -> dict[int, str]:
    """Each rater's Prolific submission id by rater id (what the monitor's approve button and
    reject link name); empty for a study with no Prolific study."""
    rows = ProlificSubmission.objects.filter(prolific_study__study=study, rater__isnull=False)
    return dict(rows.order_by("synced_at").values_list("rater_id", "submission_id"))


@register.filter
def status_of(statuses: dict[int, str], rater_id: int) -> str:
    return statuses.get(rater_id, "")
