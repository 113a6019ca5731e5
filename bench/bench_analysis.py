"""Benchmark of the stored report (analysis.current_report.study_results) on SQLite studies of 10k,
100k and 1M votes: what a page costs when nothing changed, and what computing the report costs.

    python bench/bench_analysis.py                          # 10,000, 100,000 and 1,000,000 votes
    python bench/bench_analysis.py --votes 100000 --requests 100
    python bench/bench_analysis.py --votes 1000000 --unvoted 10000 --database-url postgres://...

``--unvoted N`` adds a second study of N control items and no vote beside the voted one, and
times its dashboard, metrics API and metrics CSV when nothing changed (the stored report read):
whether a study is current must not cost a look at each of its items' votes.
``--database-url`` runs on that database (one size: the study's slug is the same for each)
instead of a SQLite file per size; it is seeded when it has no study yet, and kept.

Each size runs in processes of its own on a SQLite file in $TMPDIR (seeded once by
``seed_study`` in a process of its own: control items, 5 simulated judges × 6 votes each, every
vote with option probabilities; kept for the next run: delete it after a change to the models).
A fresh process then measures, with Django's test client
as a staff user (production settings, DEBUG off):

- the first report, from scratch: CPU and wall time (the task worker's work for a big study);
- ``--requests`` GETs each of the dashboard page, the metrics API and the metrics CSV when
  nothing changed (the stored report read): p50 / p99 wall time, and CPU time (SQLite's
  included: it runs in the process), steadier on a shared machine;
- after 50 new votes: a study up to ``ANALYSIS_BACKGROUND_VOTES`` is computed in the request
  (its CPU and wall time); a bigger one answers at once with the last report marked updating,
  and the refresh task's CPU and wall time are timed when it runs;
- the process's peak RSS (ru_maxrss) at the end: Django, the report's computation twice and
  the requests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def synthetic_frame(n_questions: int, judges: int, votes_per_item: int) -> pd.DataFrame:
    from analysis import simulate

    items = simulate.synthetic_items(n_questions, seed=0)
    frames = []
    for j in range(judges):
        params = simulate.JudgeParams(
            position=0.3 * j,
            length_per_token=0.01 * j,
            susceptibility=simulate.DEFAULT_SUSCEPTIBILITY,
            tie_rate=0.1,
            noise=1.0,
        )
        # Judge 0 stands for people (no labels); the LLM judges vote on the counterbalanced plan.
        votes = simulate.simulate_votes(
            items, params, votes_per_item=votes_per_item, seed=j, counterbalance_labels=j > 0
        )
        frames.append(simulate.votes_frame(items, votes, judge=f"judge-{j}", kind="human" if j == 0 else "llm"))
    frame = pd.concat(frames, ignore_index=True)
    from analysis.frame import normalise

    frame["rater"] = np.where(frame["judge"] == "judge-0", "r" + (np.arange(len(frame)) % 500).astype(str), "")
    frame["vote_id"] = np.arange(len(frame))
    llm = (frame["judge_kind"] == "llm").to_numpy()
    for option, p in PROBS.items():  # the LLM judges' votes with option probabilities
        frame[f"prob_{option}"] = np.where(llm, p, np.nan)
    return normalise(frame)


def seed_study(n_votes: int, slug: str = "bench"):
    """A study of control items with 5 simulated judges × 6 votes on each: n_votes in all,
    written with bulk_create (about a minute for a million on SQLite), each vote with option
    probabilities."""
    from analysis import simulated_judges
    from analysis.simulate import JudgeParams
    from annotations.models import Answer, ComparisonItem, Question, Study, Vote

    study = Study.objects.create(title="bench", slug=slug, votes_per_item=6)
    n_questions = max(1, n_votes // (6 * 5))  # 1 control item, 5 judges × 6 votes
    questions = Question.objects.bulk_create(
        [Question(study=study, external_id=f"q{i}", text="?", bloom_level="applying") for i in range(n_questions)]
    )
    answers = Answer.objects.bulk_create(
        [
            Answer(
                question=q,
                external_id=f"{q.external_id}-{s}",
                text="x " * (20 + i % 50),
                len_words=20 + i % 50,
                len_chars=2 * (20 + i % 50),
            )
            for i, q in enumerate(questions)
            for s in ("a1", "a2")
        ]
    )
    ComparisonItem.objects.bulk_create(
        [
            ComparisonItem(study=study, question=q, answer_a1=answers[2 * i], answer_a2=answers[2 * i + 1])
            for i, q in enumerate(questions)
        ]
    )
    for j in range(5):
        simulated_judges.judge_simulate(study=study, name=f"judge-{j}", params=JudgeParams(position=0.2 * j), seed=j)
    # With option probabilities, as a model judge's votes have them (the local judge's, an API's
    # with log-probabilities): the loader reads, keeps and averages them.
    Vote.objects.filter(item__study=study).update(option_probs=PROBS)
    return study


PROBS = {"first": 0.625, "second": 0.25, "tie": 0.125}

UNVOTED = "bench-unvoted"


def seed_unvoted_study(n_items: int):
    """A study of ``n_items`` control items (a question and its two answers each) and no vote."""
    from annotations.models import Answer, ComparisonItem, Question, Study

    study = Study.objects.create(title="bench, no votes", slug=UNVOTED, votes_per_item=6)
    questions = Question.objects.bulk_create(
        [Question(study=study, external_id=f"u{i}", text="?", bloom_level="applying") for i in range(n_items)]
    )
    answers = Answer.objects.bulk_create(
        [
            Answer(question=q, external_id=f"{q.external_id}-{s}", text="y " * 30, len_words=30, len_chars=60)
            for q in questions
            for s in ("a1", "a2")
        ]
    )
    ComparisonItem.objects.bulk_create(
        [
            ComparisonItem(study=study, question=q, answer_a1=answers[2 * i], answer_a2=answers[2 * i + 1])
            for i, q in enumerate(questions)
        ],
        batch_size=1000,
    )
    return study


def add_votes(study, n: int) -> None:
    """``n`` new votes on the study's first items by a judge of their own, as a live study gets."""
    from annotations.models import ComparisonItem, Judge, Study, Vote

    judge, _ = Judge.objects.get_or_create(name="late-judge", study=None, defaults={"kind": Judge.Kind.SIMULATED})
    start = Vote.objects.filter(judge=judge).count()  # each round once per item
    items = list(ComparisonItem.objects.filter(study=study).order_by("id").values_list("id", flat=True)[:n])
    Vote.objects.bulk_create(
        [
            Vote(
                item_id=item,
                judge=judge,
                round=start + i,
                shown_first="a1",
                choice_shown="first",
                choice="a1",
                option_probs=PROBS,
            )
            for i, item in enumerate(items)
        ]
    )
    Study.objects.filter(pk=study.pk).data_changed()  # as every writer of votes does


def get_times(client, urls: dict[str, str], requests: int, prefix: str = "") -> dict:
    """p50 / p99 wall and CPU time (ms) of ``requests`` GETs of each URL."""
    out = {}
    for name, url in urls.items():
        times, cpus = [], []
        for _ in range(requests):
            started, cpu = time.perf_counter(), time.process_time()
            response = client.get(url)
            if response.streaming:
                b"".join(response.streaming_content)
            times.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)  # SQLite runs in this process: its work too
            assert response.status_code == 200, (url, response.status_code)
        for label, values in (("", sorted(times)), ("_cpu", sorted(cpus))):
            out[f"{prefix}{name}{label}_p50_ms"] = 1000 * statistics.median(values)
            out[f"{prefix}{name}{label}_p99_ms"] = 1000 * values[min(len(values) - 1, int(0.99 * len(values)))]
    return out


def study_urls(slug: str) -> dict[str, str]:
    from django.urls import reverse

    return {
        "dashboard": reverse("analysis:study", args=[slug]),
        "metrics_api": reverse("api:study-metrics", args=[slug]),
        "metrics_csv": reverse("analysis:export", args=[slug, "metrics"]),
    }


def measure(n_votes: int, requests: int) -> dict:
    """Run in the process of one size, Django set up on its seeded file."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from analysis import current_report, stored_reports
    from analysis.models import StudyReport
    from annotations.models import Study

    study = Study.objects.get(slug="bench")
    StudyReport.objects.filter(study=study).delete()
    out: dict = {"votes": n_votes, "threshold": settings.ANALYSIS_BACKGROUND_VOTES, "cpus": os.cpu_count()}
    out["load_before"] = os.getloadavg()[0]

    def cpu_and_wall(action) -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        action()
        return time.process_time() - cpu, time.perf_counter() - started

    out["first_report_cpu"], out["first_report_wall"] = cpu_and_wall(
        lambda: current_report.study_results(study=study, wait=True)
    )
    # A superuser: the dashboard, API and exports follow Django's model permissions.
    staff, _ = get_user_model().objects.update_or_create(
        username="bench-staff", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(staff)
    urls = study_urls("bench")
    out.update(get_times(client, urls, requests))
    unvoted = Study.objects.filter(slug=UNVOTED).first()
    if unvoted is not None:
        out["unvoted_items"] = unvoted.items.count()
        StudyReport.objects.filter(study=unvoted).delete()
        started = time.perf_counter()
        assert client.get(study_urls(UNVOTED)["dashboard"]).status_code == 200
        out["unvoted_first_report_wall"] = time.perf_counter() - started
        out.update(get_times(client, study_urls(UNVOTED), requests, prefix="unvoted_"))
    add_votes(study, 50)
    stored = StudyReport.objects.get(study=study)
    if n_votes <= settings.ANALYSIS_BACKGROUND_VOTES:
        out["after_new_votes_cpu"], out["after_new_votes_wall"] = cpu_and_wall(lambda: client.get(urls["dashboard"]))
    else:
        started = time.perf_counter()
        page = client.get(urls["dashboard"]).content.decode()
        out["updating_page_ms"] = 1000 * (time.perf_counter() - started)
        assert "<strong>updating</strong>" in page
        # The task as the worker runs it (the request's on_commit enqueued it: the immediate
        # backend is not configured here, so it is called directly).
        cpu, wall = cpu_and_wall(lambda: stored_reports.study_report_refresh(report_id=stored.pk))
        out["refresh_task_cpu"], out["refresh_task_wall"] = cpu, wall
    stored.refresh_from_db()
    assert stored.n_votes > n_votes - 30 and stored.computations == 2, (stored.n_votes, stored.computations)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_after"] = os.getloadavg()[0]
    return out


def db_path(n_votes: int) -> Path:
    return Path(tempfile.gettempdir()) / f"bench_analysis_{n_votes}.sqlite3"


def one_size(n_votes: int, requests: int, *, seed: bool, unvoted: int, database_url: str | None) -> None:
    """A child process of one size: seed its database (``seed``), or measure and print JSON.
    Apart, so that the measuring process's peak memory is not the seeding's."""
    from bench.django_env import setup_django

    # The task backend is the database queue, as in production; measure() runs the task itself.
    url = database_url or f"sqlite:///{db_path(n_votes)}"
    setup_django(url, DJANGO_ALLOWED_HOSTS="testserver", DJANGO_SECURE_COOKIES="0")
    if seed:
        from annotations.models import Study

        started = time.perf_counter()
        if not Study.objects.filter(slug="bench").exists():
            seed_study(n_votes)
        if unvoted and not Study.objects.filter(slug=UNVOTED).exists():
            seed_unvoted_study(unvoted)
        print(f"seeded {n_votes:,} votes in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    else:
        print(json.dumps(measure(n_votes, requests)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", default="10000,100000,1000000", help="sizes, comma-separated")
    parser.add_argument("--requests", type=int, default=100, help="GETs of each URL when nothing changed")
    parser.add_argument("--unvoted", type=int, default=0, help="items of a second study without votes (0: none)")
    parser.add_argument("--database-url", help="a database to run on instead of a SQLite file per size")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process of one size
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one_size(args.one, args.requests, seed=args.seed, unvoted=args.unvoted, database_url=args.database_url)
        return
    for n in (int(v) for v in args.votes.split(",")):
        child = [sys.executable, __file__, "--one", str(n), "--requests", str(args.requests)]
        child += ["--unvoted", str(args.unvoted)] + (["--database-url", args.database_url] if args.database_url else [])
        if args.database_url or args.unvoted or not db_path(n).exists():
            subprocess.run([*child, "--seed"], check=True)
        result = json.loads(subprocess.run(child, check=True, stdout=subprocess.PIPE, text=True).stdout)
        print(" ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
