"""Benchmark of importing PRD's Vicuna-80 votes (18,720 votes: people and five LLM judges) and of
analysing the study: wall time of ``import_votes --format prd`` (parse + write, one
transaction) and of ``services.study_analyze`` (database → frame → report, 1,000 bootstrap
resamples), each in a fresh database. Targets: import within 30 s (the analysis target is retired).
Wall and CPU time (of this process; the database's own work is in the wall time only) are both
printed: on a shared machine the wall time mostly measures the other processes.

    python bench/bench_import_prd.py                          # SQLite in a temporary folder
    python bench/bench_import_prd.py --database-url postgres://biasstudy:biasstudy@127.0.0.1:5432/bench_prd
    python bench/bench_import_prd.py --repeat 3 --path /elsewhere/prd_vicuna80_lfqa

The data set is found as the tests find it (biasstudy.datasets: $BIASSTUDY_DATASETS, else
../shared/datasets from the repository root) unless --path names it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from biasstudy.datasets import dataset_path  # noqa: E402

DATASET = dataset_path("prd_vicuna80_lfqa")


def once(database_url: str, path: str) -> None:
    """In this (fresh) process: migrate, import, analyse; print the timings as JSON."""
    from bench.django_env import setup_django

    setup_django(database_url)
    from django.core.management import call_command

    from analysis import services
    from annotations.models import Study, Vote

    if Study.objects.filter(slug="bench-prd").exists():
        raise SystemExit("study bench-prd already exists: use a fresh database")
    study = Study.objects.create(title="PRD bench", slug="bench-prd")
    started, cpu = time.perf_counter(), time.process_time()
    call_command("import_votes", path, "--format", "prd", "--study", study.slug, verbosity=0)
    imported, imported_cpu = time.perf_counter() - started, time.process_time() - cpu
    started, cpu = time.perf_counter(), time.process_time()
    result = services.study_analyze(study=study)
    analysed, analysed_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        json.dumps(
            {
                "import_s": imported,
                "import_cpu_s": imported_cpu,
                "analyze_s": analysed,
                "analyze_cpu_s": analysed_cpu,
                "votes": Vote.objects.filter(item__study=study).count(),
                "judges": len(result["judges"]),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", default=str(DATASET))
    parser.add_argument("--database-url", help="default: a new SQLite file per run")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        once(args.database_url, args.path)
        return
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            url = args.database_url or f"sqlite:///{tmp}/bench.sqlite3"
            if args.database_url and url.startswith("postgres"):
                _recreate_postgres(url)
            out = subprocess.run(
                [sys.executable, __file__, "--once", "--database-url", url, "--path", args.path],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
    for key in ("import_s", "import_cpu_s", "analyze_s", "analyze_cpu_s"):
        values = [r[key] for r in runs]
        print(f"{key}: median {statistics.median(values):.2f} s (runs: {', '.join(f'{v:.2f}' for v in values)})")


def _recreate_postgres(url: str) -> None:
    """Drop and create the benchmark's PostgreSQL database (named in the URL) so every run is fresh."""
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
