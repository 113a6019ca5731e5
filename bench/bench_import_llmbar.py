"""Benchmark of the LLMBar import and its analysis: all 44,456 vote rows within 30 s, the
analysis of the imported study within 3 s.

    python bench/bench_import_llmbar.py                  # a throwaway SQLite database
    DATABASE_URL=postgres://... python bench/bench_import_llmbar.py   # a test database there

Times ``manage.py import_votes PATH --format llmbar`` (parse + write, one transaction) and then
``reports.study_report`` on the study (loading the frame from the database, then the report
with 1,000 bootstrap resamples), each once on a fresh database (the import) and ``--repeat``
times (the analysis; the median is printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from biasstudy.datasets import dataset_path  # noqa: E402

DATASET = dataset_path("llmbar")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=DATASET)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL")
    tmp = None
    if not url:
        tmp = tempfile.TemporaryDirectory()
        url = f"sqlite:///{tmp.name}/bench.sqlite3"
    else:
        url = url.rsplit("/", 1)[0] + "/bench_llmbar"
        _recreate(url)
    from bench.django_env import setup_django

    setup_django(url)
    from django.core.management import call_command

    from analysis import loader, reports
    from annotations.models import Study, Vote

    study = Study.objects.create(title="LLMBar", slug="llmbar")
    started, cpu = time.perf_counter(), time.process_time()
    call_command("import_votes", str(args.path), "--format", "llmbar", "--study", "llmbar", verbosity=0)
    import_s, import_cpu = time.perf_counter() - started, time.process_time() - cpu
    n_votes = Vote.objects.filter(item__study=study).count()
    # CPU time beside wall time: on a shared machine the wall clock also counts other people's work.
    print(f"import: {import_s:.1f} s wall, {import_cpu:.1f} s CPU for {n_votes} votes ({url.split(':')[0]})")
    times, cpus, loads = [], [], []
    # reports.study_report computes the report each time (services.study_analyze would read the
    # stored one after the first run).
    for _ in range(args.repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = reports.study_report(study=study)
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        cpu = time.process_time()
        loader.study_frame(study)
        loads.append(time.process_time() - cpu)
    print(
        f"analysis (load + report): median {statistics.median(times):.2f} s wall, {statistics.median(cpus):.2f} s CPU "
        f"over {args.repeat} runs (loading the frame alone: {statistics.median(loads):.2f} s CPU); "
        f"{len(result['judges'])} judges"
    )
    if tmp is not None:
        tmp.cleanup()


def _recreate(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
