"""The study's report (and the figures drawn from it), kept in Django's default cache per study,
filters and options.

A dashboard page with its six figures asks for the same report seven times, and its 10-second
refresh asks again when nothing has changed. The report is kept under a key that names every
input it reads, so an entry can never be out of date; a changed input makes a new key and the
old entry is never read again (it expires after ``TIMEOUT``):

- the study's own row (thresholds, votes per item, created_at: a study made again under a
  reused id is another study);
- the data version: the newest vote id (of any study: reading it costs one index step, where
  counting a study's votes would scan them), and per other table the report reads the row
  count and the highest id (new or deleted rows), plus what changes in place: a judge run's
  heartbeat (failed requests retried), raters flagged or unflagged, answer lengths (an edited
  text);
- an edit token, replaced whenever a question, answer, item, judge or perturbation kind is
  saved or deleted one by one (the admin's edits of a Bloom level, a gold label, a judge's
  name), see ``apps.AnalysisConfig.ready``;
- the filters and options as given, and the analysis code itself (a deploy changes the
  report's shape).

The data version is one query of scalar subqueries. The cache is a help, never a need: if it
fails (its table missing, Redis down) the report is computed as without it.

A report computed anew (new votes) still takes each judge's part of the last one whose inputs
have not changed (``judge_reports``): a live study's new votes come from a judge or two.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pickle
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Max, OuterRef, Q, Subquery, Sum

from annotations.models import Answer, ComparisonItem, Question, Rater, Study, Vote

log = logging.getLogger(__name__)

TIMEOUT = 15 * 60  # seconds: entries of old keys do not linger
MAX_BYTES = 16 * 1024 * 1024  # a report bigger than this is computed each time, not stored
EDITS_KEY = "analysis:edit-token"
# The analysis code: a deploy that changes how a report is made or shaped changes every key.
CODE_VERSION = hashlib.sha256(
    b"".join(p.read_bytes() for p in sorted(Path(__file__).resolve().parent.glob("*.py")))
).hexdigest()[:16]


def _per_study(queryset, study_path: str, **aggregates) -> dict[str, Subquery]:
    """One scalar subquery per aggregate of ``queryset``'s rows of the outer study (named
    version_…, apart from the study's own fields and relations)."""
    grouped = queryset.filter(**{study_path: OuterRef("pk")}).order_by().values(study_path)
    return {
        f"version_{name}": Subquery(grouped.annotate(value=aggregate).values("value")[:1])
        for name, aggregate in aggregates.items()
    }


def items_version(study: Study) -> dict:
    """The part of the data version that ``loader.study_items`` reads (the study's items,
    questions and answers; the edit token covers edits in place). Three plain aggregates: as
    scalar subqueries of the study, SQLite took four times as long over 66,666 answers."""
    return {
        **ComparisonItem.objects.filter(study=study).aggregate(items=Count("id"), item_max=Max("id")),
        **Question.objects.filter(study=study).aggregate(questions=Count("id"), question_max=Max("id")),
        **Answer.objects.filter(question__study=study).aggregate(
            answers=Count("id"),
            answer_max=Max("id"),
            words=Sum("len_words"),
            chars=Sum("len_chars"),
            bpe=Sum("len_bpe"),
            spaces=Sum("len_spaces"),
        ),
    }


def data_version(study: Study) -> dict:
    """What the report of ``study`` reads, summed up in one query and the items' three
    aggregates: equal versions, equal inputs (with the edit token for edits made in place).

    Votes are the big table, so they are not scanned: the newest vote id of all studies (one
    step down the primary key's index) changes with every vote anywhere, and a rater's vote
    also raises their ``votes_done``, a judge run's writes its ``heartbeat_at``. Votes are
    never edited or deleted one by one; a judge run's retries rewrite failed votes in place,
    in the transaction that also beats the run's heart."""
    from judges.models import JudgeRun  # the judges app depends on annotations, not the reverse

    fields = {
        "version_vote_max": Subquery(Vote.objects.order_by("-id").values("id")[:1]),
        **_per_study(
            Rater.objects.all(),
            "study",
            raters=Count("id"),
            rater_max=Max("id"),
            flagged=Count("id", filter=Q(flagged=True)),
            flagged_ids=Sum("id", filter=Q(flagged=True)),
            # Ids are taken before commit: a vote given id 100 may commit after the vote of id
            # 101 has been read. Each vote bumps its rater's count, or its run's heartbeat, in
            # its own transaction, so such a vote still changes the version when it commits.
            votes_done=Sum("votes_done"),
        ),
        **_per_study(
            JudgeRun.objects.all(),
            "study",
            runs=Count("id"),
            run_max=Max("id"),
            heartbeat=Max("heartbeat_at"),
            finished=Max("finished_at"),
        ),
    }
    row = Study.objects.filter(pk=study.pk).annotate(**fields).values().first()
    if row is None:
        return {"missing": study.pk}
    # Items, questions and answers as the loader checks its kept items: plain aggregates (as
    # scalar subqueries here they took 0.24 s per refresh at 66,666 answers on SQLite).
    return {**row, "items": items_version(study)}


def edit_token_renew(**_signal_kwargs) -> None:
    """A signal receiver: a row the report reads was edited, so no stored report matches. Once
    the edit is committed: renewed earlier, a report computed meanwhile from the rows before
    the edit would be stored under the new token."""
    transaction.on_commit(lambda: safely(lambda: cache.set(EDITS_KEY, uuid.uuid4().hex, None)))


def vote_edit_renew(*, created: bool = False, **signal_kwargs) -> None:
    """A signal receiver for votes: a vote saved again or deleted (not a new vote, which the
    data version sees) renews the edit token, so neither a stored report nor the votes
    ``loader.study_votes`` keeps is used again."""
    if not created:
        edit_token_renew()


def edit_token() -> str:
    token = cache.get(EDITS_KEY)
    if token is None:  # never set, or evicted: a new one, so no entry stored before can match
        token = uuid.uuid4().hex
        cache.set(EDITS_KEY, token, None)
    return token


def cache_key(study: Study, filters, options, part: str = "report") -> str:
    parts = {
        "part": part,
        "code": CODE_VERSION,
        "edits": edit_token(),
        "data": data_version(study),
        "filters": dataclasses.asdict(filters),
        "options": dataclasses.asdict(options),
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"analysis:report:{study.pk}:{digest}"


def safely(action: Callable, default=None):
    """Run a cache action; on any failure log it and return ``default``. Inside a transaction a
    failed query of the database cache is rolled back to a savepoint, so the caller's
    transaction goes on."""
    try:
        if transaction.get_connection().in_atomic_block:
            with transaction.atomic():
                return action()
        return action()
    except Exception:  # the cache is an optimisation: whatever broke it, compute instead
        log.warning("analysis cache unavailable", exc_info=True)
        return default


def cached(study: Study, filters, options, compute: Callable[[], Any], *, part: str = "report") -> Any:
    """``part`` of the study's results (the report, or a figure drawn from it) from the cache
    when its inputs are unchanged, else ``compute()`` (then stored)."""
    key = safely(lambda: cache_key(study, filters, options, part))
    if key is None:
        return compute()
    found = safely(lambda: cache.get(key))
    if found is not None:
        return found
    result = compute()
    body = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    if len(body) <= MAX_BYTES:
        safely(lambda: cache.set(key, result, TIMEOUT))
    return result


def judge_reports(study: Study, filters, options, compute: Callable[[dict], Any]) -> Any:
    """``compute(judge_reports)`` with the per-judge parts of the study's last report under
    these filters and options (``report.analyze``'s ``judge_reports``: each under a digest of
    everything it reads, so never out of date), kept afterwards for the next one."""
    parts = {"code": CODE_VERSION, "filters": dataclasses.asdict(filters), "options": dataclasses.asdict(options)}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    key = f"analysis:judges:{study.pk}:{study.created_at.isoformat()}:{digest}"
    kept = safely(lambda: cache.get(key)) or {}
    result = compute(kept)
    if len(pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)) <= MAX_BYTES:
        safely(lambda: cache.set(key, kept, TIMEOUT))
    return result
