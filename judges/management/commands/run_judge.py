"""Start (or resume) an LLM judge's run over a study: `manage.py run_judge --study S --judge J`.

Without --wait the run is queued for the task workers (db_worker or rqworker, whichever queue the
settings name); with --wait it runs
here, with a progress bar, and prints a summary.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from annotations.models import Judge, Study
from biasstudy.limits import VOTES_PER_ITEM_MAX, int_argument
from biasstudy.queue import QueueUnavailable
from judges.models import JudgeRun
from judges.services import JudgeRunError, judge_run_execute, judge_run_resume, judge_run_start
from judges.tasks import worker_command


def find_study(value: str) -> Study:
    study = Study.objects.filter(slug=value).first() or (
        Study.objects.filter(pk=value).first() if value.isdigit() else None
    )
    if study is None:
        raise CommandError(f"--study {value!r}: no study with that slug or id")
    return study


def find_judge(value: str) -> Judge:
    judges = Judge.objects.filter(kind=Judge.Kind.LLM)
    judge = judges.filter(name=value).first() or (judges.filter(pk=value).first() if value.isdigit() else None)
    if judge is None:
        names = ", ".join(repr(name) for name in judges.values_list("name", flat=True)) or "none yet"
        raise CommandError(f"--judge {value!r}: no LLM judge with that name or id (known: {names})")
    return judge


def summary(run: JudgeRun) -> str:
    p = run.progress()
    lines = [
        f"Run #{run.pk}: {run.judge} on {run.study.slug}: {run.status}",
        f"  votes {p['done']}/{p['total']} (invalid {p['invalid']}, failed {p['failed']}, from cache {p['cached']})",
        f"  tokens in {p['tokens_in']}, out {p['tokens_out']}"
        + (f", cost {p['cost']:.4f}" if p["cost"] is not None else ""),
    ]
    if run.error:
        lines.append(f"  error: {run.error}")
    lines += [f"  item {item} round {rnd}: {error[:160]}" for item, rnd, error in p["last_errors"]]
    return "\n".join(lines)


def run_inline(run: JudgeRun, *, show_progress: bool) -> JudgeRun:
    with tqdm(total=run.total, unit="vote", disable=not show_progress, dynamic_ncols=True) as bar:
        return judge_run_execute(run_id=run.pk, progress=bar.update)


class Command(BaseCommand):
    help = "Start or resume an LLM judge's run over every item of a study."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="Study slug or id.")
        parser.add_argument("--judge", required=True, help="LLM judge name or id.")
        parser.add_argument(
            "--votes-per-item", type=int_argument(1, VOTES_PER_ITEM_MAX), help="Override the judge's votes per item."
        )
        parser.add_argument("--resume", action="store_true", help="Resume the latest stopped run instead of a new one.")
        parser.add_argument("--retry-failed", action="store_true", help="With --resume: ask again for failed votes.")
        parser.add_argument("--wait", action="store_true", help="Run here with a progress bar instead of queueing.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["retry_failed"] and not options["resume"]:
            raise CommandError("--retry-failed only applies with --resume (a new run has no failed votes)")
        study, judge = find_study(options["study"]), find_judge(options["judge"])
        enqueue = not options["wait"]
        try:
            if options["resume"]:
                run = JudgeRun.objects.filter(study=study, judge=judge).first()
                if run is None:
                    raise CommandError(f"--resume: {judge} has no run on {study.slug} yet")
                run = judge_run_resume(run=run, retry_failed=options["retry_failed"], enqueue=enqueue)
            else:
                run = judge_run_start(
                    study=study, judge=judge, votes_per_item=options["votes_per_item"], enqueue=enqueue
                )
        except (JudgeRunError, QueueUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        if enqueue:
            if options["verbosity"] >= 1:
                self.stdout.write(
                    f"Run #{run.pk} queued ({run.total} votes); the task workers ({worker_command()}) run it."
                )
            return
        run = run_inline(run, show_progress=options["verbosity"] >= 1)
        if options["verbosity"] >= 1:
            self.stdout.write(summary(run))
        if run.status == JudgeRun.Status.FAILED:
            raise CommandError(f"run #{run.pk} failed: {run.error}")
