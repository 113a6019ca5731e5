"""Benchmark of the analysis: one million votes on 40,000 items analysed in at most 3 s.

    python bench/bench_analysis.py                 # the analysis on a synthetic frame
    python bench/bench_analysis.py --db 1000000    # plus loading that many votes from the database
    DATABASE_URL=postgres://.../name python bench/bench_analysis.py --db 1000000 --repeat 1   # on PostgreSQL

The frame is built synthetically (10,000 questions × control + 3 perturbations = 40,000
items; 5 simulated judges × 5 votes per item = 1,000,000 votes) and not timed. The timed part
is ``report.analyze``: filters, item preferences, ASR/accuracy with 1,000 bootstrap resamples,
position, label and position preference, verbosity, length-controlled GLMs with cross-validation,
agreement, Bloom breakdown; then again after 50 of one judge's verdicts changed, with the other
judges' parts of the last report kept (``judge_reports``: a live study's refresh).
Loading from the database is measured separately (``--db``), in a throwaway SQLite database (or
$DATABASE_URL's server with a test database), on a study seeded with that many votes: the load
from scratch (an empty votes cache: a new process, or a deploy), then a live study's refresh
after 50 new votes by a sixth judge (``loader.study_votes`` reads only those; the timed part
includes writing them), each alone and with the report (``services.study_report``: computed,
not taken from the results cache; the other judges' parts taken from the last report, as
nothing they read changed); CPU and wall time, with the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
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


def bench_analysis(n_questions: int, judges: int, votes_per_item: int, repeat: int) -> None:
    from analysis import report, stats
    from analysis.frame import CHOICES

    frame = synthetic_frame(n_questions, judges, votes_per_item)
    n_items = frame["item_id"].nunique()
    print(
        f"frame: {len(frame):,} votes on {n_items:,} items, {judges} judges "
        f"({frame.memory_usage(deep=False).sum() / 2**20:.0f} MiB)"
    )
    times = []
    for _ in range(repeat):
        stats.bootstrap_counts_forget()  # from scratch: as a new process would
        started = time.perf_counter()
        result = report.analyze(frame, study="bench", votes_per_item=votes_per_item)
        times.append(time.perf_counter() - started)
    print(
        f"analyze: best {min(times):.2f} s, median {statistics.median(times):.2f} s, "
        f"all {', '.join(f'{t:.2f}' for t in times)} s "
        f"(cpu count {os.cpu_count()}, load {os.getloadavg()[0]:.1f})"
    )
    assert len(result["judges"]) == judges
    # A live study's refresh: one judge's verdicts changed (as new votes do), the other judges'
    # parts taken from the last report (services.study_report keeps them).
    kept: dict = {}
    report.analyze(frame, study="bench", votes_per_item=votes_per_item, judge_reports=kept)
    refreshed = []
    for r in range(repeat):
        changed = frame.copy()
        last = np.flatnonzero((changed["judge"] == "judge-1").to_numpy())[-50:]
        changed.loc[last, "choice"] = list(CHOICES[r % 3 :] + CHOICES[: r % 3]) * 16 + ["a1", "a2"]
        cpu = time.process_time()
        report.analyze(changed, study="bench", votes_per_item=votes_per_item, judge_reports=kept)
        refreshed.append(time.process_time() - cpu)
    print(f"analyze again after 50 of one judge's votes changed: CPU {', '.join(f'{t:.2f}' for t in refreshed)} s")
    tracemalloc.start()
    report.analyze(frame, study="bench", votes_per_item=votes_per_item)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"peak memory during analyze (tracemalloc, beyond the frame): {peak / 2**20:.0f} MiB; "
        f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


def seed_study(n_votes: int, slug: str = "bench"):
    """A study of control items with 5 simulated judges × 6 votes on each: n_votes in all,
    written with bulk_create (about a minute for a million on SQLite), each vote with option
    probabilities."""
    from analysis import services
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
        services.judge_simulate(study=study, name=f"judge-{j}", params=JudgeParams(position=0.2 * j), seed=j)
    # With option probabilities, as a model judge's votes have them (the local judge's, an API's
    # with log-probabilities): the loader reads, keeps and averages them.
    Vote.objects.filter(item__study=study).update(option_probs=PROBS)
    return study


PROBS = {"first": 0.625, "second": 0.25, "tie": 0.125}


def add_votes(study, n: int) -> None:
    """``n`` new votes on the study's first items by a judge of their own, as a live study gets."""
    from annotations.models import ComparisonItem, Judge, Vote

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


def timed(label: str, action, repeat: int) -> None:
    cpus, walls = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    print(
        f"{label}: CPU {', '.join(f'{t:.2f}' for t in cpus)} s, wall {', '.join(f'{t:.2f}' for t in walls)} s "
        f"(load {os.getloadavg()[0]:.1f})",
        flush=True,
    )


def bench_db(n_votes: int, repeat: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ.setdefault("SQLITE_TEST_NAME", str(Path(tempfile.gettempdir()) / "bench_analysis.sqlite3"))
    import django

    django.setup()
    from django.core.cache import caches
    from django.test.runner import DiscoverRunner
    from django.test.utils import setup_test_environment

    setup_test_environment()
    runner = DiscoverRunner(verbosity=0)
    old = runner.setup_databases()
    try:
        from analysis import loader, services, stats

        study = seed_study(n_votes)
        vendor = django.db.connection.vendor
        print(f"{vendor}: {n_votes:,} votes seeded", flush=True)
        votes = caches[loader.VOTES_CACHE]

        def cold_load():
            votes.clear()
            assert len(loader.study_frame(study)) >= n_votes - 30

        def cold_analysis():  # the report computed, not taken from the results cache
            votes.clear()
            caches["default"].clear()  # nor any judge's part of the last report
            stats.bootstrap_counts_forget()
            services.study_report(study=study)

        def refresh_load():
            add_votes(study, 50)
            loader.study_frame(study)

        def refresh_analysis():
            add_votes(study, 50)
            services.study_report(study=study)

        timed(f"load from scratch ({vendor})", cold_load, repeat)
        timed(f"load + analysis from scratch ({vendor})", cold_analysis, repeat)
        add_votes(study, 1)  # the new votes' judge made (a new judge is an edit: everything is read again)
        loader.study_frame(study)
        timed(f"load after 50 new votes ({vendor})", refresh_load, repeat)
        timed(f"load + analysis after 50 new votes ({vendor})", refresh_analysis, repeat)
    finally:
        runner.teardown_databases(old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--votes-per-item", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", type=int, default=0, help="also time loading this many votes from the database")
    parser.add_argument("--no-synthetic", action="store_true", help="only the database part (with --db)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    if not args.no_synthetic:
        bench_analysis(args.questions, args.judges, args.votes_per_item, args.repeat)
    if args.db:
        bench_db(args.db, args.repeat)


if __name__ == "__main__":
    main()
