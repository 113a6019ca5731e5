"""The engine of a judge run: plan what is missing, ask the model concurrently, store votes.

One process runs one run at a time (the run is claimed atomically). Worker threads only talk
to the model; the calling thread alone touches the database, writing finished votes in small
batches (at least every half second), so a killed worker loses no more than the requests in
flight and the answers of the last half second, and a resume plans only what is missing.

When the database fails a batch's write (away, restarting), the batch stays in memory and its
write is tried again with backoff, while the worker threads send no new request; each write
beats the run's heart only if the heartbeat is still the one this worker wrote last, so the
worker knows whether the run is still its own. It keeps trying until the run would be taken
for dead (the heartbeat older than the stale time, when a watchdog may hand the run to another
worker): an outage shorter than that loses no received reply and asks for none twice. Then it
gives up, and keeps the replies it received but could not store in a file
(settings.JUDGE_RUN_REPLIES_DIR) that the worker resuming the run stores as cached replies
before it plans: it does not ask for them again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from annotations.models import ComparisonItem, Study, Vote, choice_from_shown
from judges import backends
from judges.models import CachedResponse, JudgeRun, stale_after
from judges.parsing import parse_vote
from judges.plan import PlannedVote, item_rounds
from judges.probs import option_probs
from judges.prompts import label_scheme, render_messages, vote_context, vote_grammar

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.5
FLUSH_VOTES = 200
# A batch whose write failed is written again after this long, doubling up to the most.
WRITE_RETRY_SECONDS = 0.25
WRITE_RETRY_MOST_SECONDS = 2.0


class WriteOutage(Exception):
    """The database did not take a batch of votes before the run went stale."""

    def __init__(self, message: str, outcomes: list[Outcome]):
        super().__init__(message)
        self.outcomes = outcomes


class Stopped(Exception):
    """The run was cancelled while this request waited."""


@dataclass
class Unit:
    item_id: int
    planned: PlannedVote
    messages: list[dict[str, str]]
    keys: list[str]  # cache key per attempt (0 = first try, then one per invalid retry)
    existing_vote_id: int | None = None  # a failed vote being retried


@dataclass
class Outcome:
    unit: Unit
    status: str
    choice_shown: str | None = None
    raw_output: str = ""
    option_probs: dict[str, float] | None = None
    error: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    new_cache: list[CachedResponse] = field(default_factory=list)


class RateLimiter:
    """Spaces request starts at least 60/rpm seconds apart across all threads."""

    def __init__(self, rpm: int):
        self.interval = 60.0 / rpm if rpm else 0.0
        self.next_at = 0.0
        self.lock = threading.Lock()

    def wait(self, stop: threading.Event) -> None:
        if not self.interval:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_at)
            self.next_at = start + self.interval
        if start > now and stop.wait(start - now):
            raise Stopped


def _seed(config: dict[str, Any], sample: int, attempt: int) -> int | None:
    if config["seed"] is None:
        return None
    return config["seed"] + 1009 * sample + attempt


def cache_key(
    config: dict[str, Any], messages: list[dict[str, str]], *, sample: int, attempt: int, labels_swapped: bool = False
) -> str:
    identity = {
        "backend": config["backend"],
        "base_url": config["base_url"],
        "model": config["model"],
        "messages": messages,
        "style": config["prompt_style"],
        "temperature": config["temperature"],
        "max_tokens": config["max_tokens"],
        "seed": _seed(config, sample, attempt),
        "logprobs": config["logprobs"],
        "sample": sample,
        "attempt": attempt,
    }
    if config.get("constrain_vote"):
        identity["grammar"] = True  # only when set, so the keys of earlier runs stay valid
    if labels_swapped:
        # The swapped labels are in the messages already, unless a template leaves them out:
        # then the same text is read with the other labels, a different request. (Only added
        # when swapped, so the keys of runs made before label orders existed stay valid.)
        identity["labels_swapped"] = True
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()


class RunContext:
    def __init__(self, config: dict[str, Any], backend: backends.Backend, cache: dict[str, CachedResponse]):
        self.config = config
        self.backend = backend
        self.cache = cache
        self.stop = threading.Event()
        # Cleared while the database cannot take the votes received: no new request goes out,
        # so what is at stake in an outage is the batch and the requests already in flight.
        self.writable = threading.Event()
        self.writable.set()
        self.limiter = RateLimiter(config["rpm_limit"])

    def call(self, request: backends.Request, meta: dict[str, Any]) -> backends.Completion:
        """One request with retries on transient errors; raises BackendError when they run out."""
        for attempt in range(self.config["max_retries"] + 1):
            while not self.writable.wait(0.1):
                if self.stop.is_set():
                    raise Stopped
            if self.stop.is_set():
                raise Stopped
            self.limiter.wait(self.stop)
            meta["requests"] = meta.get("requests", 0) + 1
            started = time.monotonic()
            try:
                completion = self.backend.complete(request)
            except backends.TransientError as exc:
                meta.setdefault("retried_errors", []).append(backends.storable(str(exc)[:200])[0])
                if attempt == self.config["max_retries"]:
                    raise backends.BackendError(f"gave up after {attempt + 1} tries: {exc}") from exc
                delay = backends.backoff_delay(
                    attempt, base=self.config["retry_base_seconds"], retry_after=exc.retry_after
                )
                if self.stop.wait(delay):
                    raise Stopped from exc
                continue
            meta["latency_ms"] = meta.get("latency_ms", 0) + round(1000 * (time.monotonic() - started))
            return completion
        raise AssertionError("unreachable")

    def process(self, unit: Unit) -> Outcome | None:
        """Ask (or read from the cache) until the vote parses or the invalid retries run out."""
        config = self.config
        # Labels as shown: the vote, its option probabilities and the local backend's scoring
        # all read "first" as the answer shown first, whichever label it had.
        scheme = label_scheme(unit.planned.scheme).in_order(unit.planned.label_order)
        meta: dict[str, Any] = {"cached": True, "tokens_in": 0, "tokens_out": 0, "latency_ms": 0}
        outcome = Outcome(unit=unit, status=Vote.Parse.INVALID, meta=meta)
        invalid_outputs = []
        for attempt, key in enumerate(unit.keys):
            hit = self.cache.get(key)
            if hit is None:
                meta["cached"] = False
                request = backends.Request(
                    messages=unit.messages,
                    model=config["model"],
                    temperature=config["temperature"],
                    max_tokens=config["max_tokens"],
                    timeout=config["timeout"],
                    seed=_seed(config, unit.planned.sample, attempt),
                    logprobs=config["logprobs"],
                    style=config["prompt_style"],
                    labels=scheme.labels(),
                    grammar=vote_grammar(style=config["prompt_style"], scheme=scheme)
                    if config.get("constrain_vote")
                    else None,
                )
                try:
                    completion = self.call(request, meta)
                except Stopped:
                    return None
                except backends.BackendError as exc:
                    # An error can quote the server (an HTTP error's body): stored as the vote's error.
                    outcome.status, outcome.error = Vote.Parse.FAILED, backends.storable(str(exc))[0]
                    break
                meta["tokens_in"] += completion.tokens_in
                meta["tokens_out"] += completion.tokens_out
                if completion.meta.get("dropped"):
                    # Garbage beside the vote (backends.checked): the vote is kept without it.
                    meta.setdefault("dropped", []).extend(completion.meta["dropped"])
                hit = CachedResponse(
                    key=key,
                    backend=config["backend"],
                    model=config["model"],
                    text=completion.text,
                    option_probs=completion.option_probs,
                    logprobs=[[t.token, t.logprob, t.top] for t in completion.logprobs]
                    if completion.logprobs
                    else None,
                    tokens_in=completion.tokens_in,
                    tokens_out=completion.tokens_out,
                )
                parsed = parse_vote(hit.text, style=config["prompt_style"], scheme=scheme)
                if parsed.ok and hit.option_probs is None and completion.logprobs:
                    hit.option_probs = option_probs(
                        completion.logprobs, label_offset=parsed.label_offset, scheme=scheme
                    )
                outcome.new_cache.append(hit)
            else:
                parsed = parse_vote(hit.text, style=config["prompt_style"], scheme=scheme)
            outcome.raw_output = hit.text
            if parsed.ok:
                outcome.status, outcome.choice_shown, outcome.option_probs = (
                    Vote.Parse.OK,
                    parsed.choice,
                    hit.option_probs,
                )
                outcome.error = kept_note(meta.get("dropped"))
                break
            outcome.error = parsed.reason
            invalid_outputs.append(hit.text)
        if len(invalid_outputs) > (outcome.status == Vote.Parse.INVALID):
            # Earlier unparseable outputs are kept too; raw_output holds the last one.
            meta["invalid_outputs"] = invalid_outputs[:-1] if outcome.status == Vote.Parse.INVALID else invalid_outputs
        return outcome


def kept_note(dropped: list[str] | None) -> str:
    """The error field of a vote kept without the garbage its reply carried beside the text."""
    return f"vote kept; dropped from the reply: {'; '.join(dropped)}"[:2000] if dropped else ""


def vote_messages(
    config: dict[str, Any], item: ComparisonItem, *, shown_first: str, scheme: str, label_order: str
) -> list[dict[str, str]]:
    """The chat messages one vote sends: `config` a run's (LLMJudge.snapshot()), the item (with
    its question and answers) in this display order, label scheme and label order. The runner
    sends these, and the judge's prompt page shows them, so the two cannot differ."""
    first, second = (item.answer_a1, item.answer_a2) if shown_first == "a1" else (item.answer_a2, item.answer_a1)
    in_order = label_scheme(scheme).in_order(label_order)
    return render_messages(
        system_template=config["system_template"],
        user_template=config["user_template"],
        style=config["prompt_style"],
        question=item.question.text,
        first=first.text,
        second=second.text,
        scheme=in_order,
        # Runs started before families were configured name the model.
        context=vote_context(
            item.context,
            shown_first=shown_first,
            scheme=in_order,
            judge_family=config.get("family") or config["model"],
        ),
    )


def plan_units(run: JudgeRun, *, retry_failed: bool) -> tuple[list[Unit], int]:
    """The votes still missing from the run (and its failed ones when retrying), and how many
    are already done."""
    config = run.config
    existing = {
        (item_id, round_): (vote_id, status)
        for vote_id, item_id, round_, status in run.votes.values_list("id", "item_id", "round", "parse_status")
    }
    items = (
        ComparisonItem.objects.filter(study=run.study)
        .select_related("question", "answer_a1", "answer_a2")
        .order_by("id")
    )
    units = []
    done = 0
    attempts = config["invalid_retries"] + 1
    for index, item in enumerate(items):
        for planned in item_rounds(
            votes_per_item=config["votes_per_item"], schemes=config["label_schemes"], item_index=index
        ):
            vote = existing.get((item.id, planned.round))
            if vote is not None and not (retry_failed and vote[1] == Vote.Parse.FAILED):
                done += 1
                continue
            messages = vote_messages(
                config, item, shown_first=planned.shown_first, scheme=planned.scheme, label_order=planned.label_order
            )
            keys = [
                cache_key(config, messages, sample=planned.sample, attempt=a, labels_swapped=planned.labels_swapped)
                for a in range(attempts)
            ]
            units.append(Unit(item.id, planned, messages, keys, vote[0] if vote else None))
    # Identical prompts next to each other (an item's rounds with the same order, label order
    # and scheme): the local backend then reuses its evaluated prompt and only scores the
    # options again (6 votes per item are 4 distinct prompts). Remote backends do not mind.
    units.sort(
        key=lambda unit: (
            unit.item_id,
            unit.planned.shown_first,
            unit.planned.label_order,
            unit.planned.scheme,
            unit.planned.round,
        )
    )
    return units, done


def load_cache(units: list[Unit]) -> dict[str, CachedResponse]:
    keys = [key for unit in units for key in unit.keys]
    cache = {}
    for start in range(0, len(keys), 500):
        for hit in CachedResponse.objects.filter(key__in=keys[start : start + 500]):
            cache[hit.key] = hit
    return cache


def _vote_fields(run: JudgeRun, outcome: Outcome) -> dict[str, Any]:
    unit = outcome.unit
    return {
        "shown_first": unit.planned.shown_first,
        "choice_shown": outcome.choice_shown,
        "choice": choice_from_shown(unit.planned.shown_first, outcome.choice_shown) if outcome.choice_shown else None,
        "label_scheme": unit.planned.scheme,
        "labels_swapped": unit.planned.labels_swapped,
        "raw_output": outcome.raw_output,
        "parse_status": outcome.status,
        "option_probs": outcome.option_probs,
        "error": outcome.error,
        "meta": outcome.meta,
        "received_at": timezone.now(),
    }


def write_outcomes(run: JudgeRun, outcomes: list[Outcome]) -> bool:
    """Store finished votes and new cache entries in one transaction; beat the heart.
    Returns False when the run is no longer this worker's: cancelled, or queued again by a
    watchdog that took it for dead (its heartbeat is then not the one this worker wrote last).
    The votes are stored either way: a slot already stored is left as it is."""
    new_votes = []
    beat_at = timezone.now()
    with transaction.atomic():
        entries = [entry for outcome in outcomes for entry in outcome.new_cache]
        if entries:
            CachedResponse.objects.bulk_create(entries, ignore_conflicts=True)
        for outcome in outcomes:
            fields = _vote_fields(run, outcome)
            if outcome.unit.existing_vote_id is None:
                new_votes.append(
                    Vote(
                        run_id=run.pk,
                        judge_id=run.judge_id,
                        item_id=outcome.unit.item_id,
                        round=outcome.unit.planned.round,
                        **fields,
                    )
                )
            else:
                Vote.objects.filter(pk=outcome.unit.existing_vote_id, parse_status=Vote.Parse.FAILED).update(**fields)
        if new_votes:
            # The (run, item, round) constraint makes a vote slot unique; the run is claimed by
            # one worker, so a conflict can only be a slot already stored (or stored by the
            # worker that took over a run this one was too long silent in).
            Vote.objects.bulk_create(new_votes, ignore_conflicts=True)
        beat = _running(run).update(heartbeat_at=beat_at)
        if outcomes:  # bulk_create and update() send no signal
            Study.objects.filter(pk=run.study_id).data_changed()
    if beat:
        run.heartbeat_at = beat_at  # once committed: a failed commit leaves the last beat as it was
    return bool(beat)


def _running(run: JudgeRun):
    """The run, while it is running and still this worker's: nobody else wrote its heartbeat
    since this worker did (claim, resume and the watchdog all write it)."""
    return JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.RUNNING, heartbeat_at=run.heartbeat_at)


def write_until_stale(run: JudgeRun, outcomes: list[Outcome], context: RunContext) -> bool:
    """`write_outcomes`, tried again with backoff while the database is away, holding back new
    requests meanwhile, until the run's last heartbeat is a stale time old. Raises WriteOutage
    then, with the batch (not stored)."""
    pause = WRITE_RETRY_SECONDS
    while True:
        try:
            written = write_outcomes(run, outcomes)
        except (OperationalError, InterfaceError) as exc:
            context.writable.clear()
            connection.close_if_unusable_or_obsolete()  # the next try connects afresh
            left = (run.heartbeat_at + stale_after() - timezone.now()).total_seconds()
            if left <= 0:
                raise WriteOutage(
                    f"the database did not take {len(outcomes)} received votes for {stale_after()}: {exc}", outcomes
                ) from exc
            log.warning("judge run %s: %s votes not written (%s); trying again", run.pk, len(outcomes), exc)
            time.sleep(min(pause, left))
            pause = min(2 * pause, WRITE_RETRY_MOST_SECONDS)
            continue
        if not context.writable.is_set():
            log.warning("judge run %s: the database took the votes again", run.pk)
            context.writable.set()
        return written


REPLY_FIELDS = ("key", "backend", "model", "text", "option_probs", "logprobs", "tokens_in", "tokens_out")


def replies_keep(run: JudgeRun, outcomes: list[Outcome]) -> Path | None:
    """Keep the model's replies of `outcomes` (which the database did not take) in a file of the
    run's, for `replies_restore`; the file's path, None when there was no reply to keep."""
    entries = [{name: getattr(entry, name) for name in REPLY_FIELDS} for o in outcomes for entry in o.new_cache]
    if not entries:
        return None
    folder = Path(settings.JUDGE_RUN_REPLIES_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"run-{run.pk}-{uuid.uuid4().hex}.json"
    partial = path.with_suffix(".part")  # written whole and renamed: a reader never sees half of it
    partial.write_text(json.dumps(entries), encoding="utf-8")
    partial.replace(path)
    return path


def replies_restore(run: JudgeRun) -> int:
    """Store the replies `replies_keep` kept for the run as cached replies (the plan then reads
    them instead of asking again), and remove their files; how many were kept."""
    restored = 0
    for path in sorted(Path(settings.JUDGE_RUN_REPLIES_DIR).glob(f"run-{run.pk}-*.json")):
        entries = [CachedResponse(**entry) for entry in json.loads(path.read_text(encoding="utf-8"))]
        CachedResponse.objects.bulk_create(entries, ignore_conflicts=True)
        path.unlink()  # once stored: a failed insert leaves the file for the next resume
        restored += len(entries)
    if restored:
        log.warning("judge run %s: %s replies kept through a database outage stored", run.pk, restored)
    return restored


def claim(run_id: int) -> JudgeRun | None:
    """Move a queued run to running; None when another worker has it or it was cancelled."""
    now = timezone.now()
    claimed = JudgeRun.objects.filter(pk=run_id, status=JudgeRun.Status.QUEUED).update(
        status=JudgeRun.Status.RUNNING, heartbeat_at=now, finished_at=None, error=""
    )
    if not claimed:
        return None
    JudgeRun.objects.filter(pk=run_id, started_at__isnull=True).update(started_at=now)
    return JudgeRun.objects.select_related("study", "judge").get(pk=run_id)


def _finish(run: JudgeRun, status: str, error: str = "") -> None:
    _running(run).update(status=status, finished_at=timezone.now(), error=error[:2000])


def execute(run_id: int, *, progress: Callable[[int], None] | None = None) -> JudgeRun:
    run = claim(run_id)
    if run is None:
        return JudgeRun.objects.get(pk=run_id)
    try:
        _execute(run, retry_failed=run.retry_failed, progress=progress)
    except WriteOutage:
        # Not failed: the run stays "running" with its heartbeat stale, and its watchdog resumes
        # it once the database is back (reading the replies kept meanwhile, replies_keep).
        log.exception("judge run %s stopped: the database is away", run.pk)
        raise
    except Exception as exc:
        log.exception("judge run %s failed", run.pk)
        _finish(run, JudgeRun.Status.FAILED, f"{type(exc).__name__}: {exc}")
        raise
    run.refresh_from_db()
    return run


def _drain(finished: queue.SimpleQueue[Future], *, timeout: float) -> list[Future]:
    """The futures finished so far: waits up to `timeout` for the first, takes the rest as is."""
    try:
        batch = [finished.get(timeout=timeout)]
    except queue.Empty:
        return []
    while True:
        try:
            batch.append(finished.get_nowait())
        except queue.Empty:
            return batch


def _execute(run: JudgeRun, *, retry_failed: bool, progress: Callable[[int], None] | None) -> None:
    config = run.config
    replies_restore(run)
    units, done = plan_units(run, retry_failed=retry_failed)
    if progress:
        progress(done)
    if not units:
        _finish(run, JudgeRun.Status.DONE)
        return
    try:
        backend = backends.make_backend(config)
    except backends.BackendError as exc:
        _finish(run, JudgeRun.Status.FAILED, str(exc))
        return
    context = RunContext(config, backend, load_cache(units))
    workers = min(config["concurrency"], backend.max_concurrency or config["concurrency"], len(units))
    breaker = max(10, 2 * workers)  # this many failures in a row: the backend is down or misconfigured
    # Finished requests come back through a queue: waiting on the set of pending futures
    # instead costs a pass over all of them per wake-up, quadratic in the run's size.
    finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"judge-run-{run.pk}") as pool:
        futures = [pool.submit(context.process, unit) for unit in units]
        for future in futures:
            future.add_done_callback(finished.put)
        try:
            error = _collect(run, context, futures, finished, progress=progress, breaker=breaker)
        except BaseException as exc:
            # Leaving the pool waits for every request still planned: stop them.
            context.stop.set()
            for future in futures:
                future.cancel()
            if not isinstance(exc, WriteOutage):
                raise
            outage = exc
        else:
            outage = None
    if outage is not None:
        # The pool is shut down: the requests that were in flight are back, in `finished`.
        late = [f.result() for f in _drain(finished, timeout=0) if not f.cancelled() and f.exception() is None]
        replies_keep(run, [*outage.outcomes, *(outcome for outcome in late if outcome is not None)])
        raise outage
    _finish(run, JudgeRun.Status.FAILED if error else JudgeRun.Status.DONE, error)


def _collect(
    run: JudgeRun,
    context: RunContext,
    futures: list[Future],
    finished: queue.SimpleQueue[Future],
    *,
    progress: Callable[[int], None] | None,
    breaker: int,
) -> str:
    """Write the votes as the requests finish; the run's error, "" if none."""
    consecutive_failures = 0
    error = ""
    buffer: list[Outcome] = []
    last_flush = time.monotonic()
    remaining = len(futures)
    while remaining:
        for future in _drain(finished, timeout=FLUSH_SECONDS):
            remaining -= 1
            if future.cancelled():
                continue
            outcome = future.result()
            if outcome is None:
                continue
            buffer.append(outcome)
            consecutive_failures = consecutive_failures + 1 if outcome.status == Vote.Parse.FAILED else 0
            if consecutive_failures >= breaker and not error:
                error = f"{breaker} requests in a row failed; last error: {outcome.error}"
                context.stop.set()
        if len(buffer) >= FLUSH_VOTES or time.monotonic() - last_flush >= FLUSH_SECONDS or not remaining:
            if not write_until_stale(run, buffer, context):
                context.stop.set()
            if progress and buffer:
                progress(len(buffer))
            buffer, last_flush = [], time.monotonic()
        if context.stop.is_set():
            for future in futures:
                future.cancel()
    return error
