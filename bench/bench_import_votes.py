"""Times importing a published vote data set and analysing it, per import format. Each run, in a
fresh process on a fresh database: ``import_votes PATH --format F --study S`` (parse + write, one
transaction), then ``current_report.study_analyze`` (database → frame → report with 1,000 bootstrap
resamples, from scratch), wall and CPU time each; the votes stored, the judges, the peak RSS.
Floors: the LLMBar and PRD imports within 30 s each, AlpacaEval's 29 models within 60 s.
CPU time is this process's (the database's own work is in the wall time only); on a shared
machine the wall time also counts the other processes.

    python bench/bench_import_votes.py                              # prd, llmbar, alpaca_eval, mtbench; SQLite
    python bench/bench_import_votes.py --format prd,alpaca_eval --repeat 3
    python bench/bench_import_votes.py --format llmbar --database-url postgres://biasstudy:biasstudy@127.0.0.1:5432/bench_votes
    python bench/bench_import_votes.py --format prd --path /elsewhere/prd_vicuna80_lfqa

The data sets are found as the tests find them (biasstudy.datasets: $BIASSTUDY_DATASETS, else
../shared/datasets from the repository root) unless --path names one.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from biasstudy.datasets import dataset_path  # noqa: E402

# The path each format's importer is given, as its reproduction test gives it (AlpacaEval: the
# folder of annotation files).
DATASETS = {
    "prd": lambda: dataset_path("prd_vicuna80_lfqa"),
    "llmbar": lambda: dataset_path("llmbar"),
    "alpaca_eval": lambda: dataset_path("alpaca_eval") / "annotations",
    "mtbench": lambda: dataset_path("mtbench_human_judgments"),
}
TIMES = ("import_s", "import_cpu_s", "analyze_s", "analyze_cpu_s")


def once(database_url: str, fmt: str, path: str) -> None:
    """In this (fresh) process: migrate, import, analyse; print the figures as JSON."""
    from bench.django_env import setup_django

    setup_django(database_url)
    from django.core.management import call_command

    from analysis import current_report
    from annotations.models import Study, Vote

    slug = f"bench-{fmt.replace('_', '-')}"
    if Study.objects.filter(slug=slug).exists():
        raise SystemExit(f"study {slug} already exists: use a fresh database")
    study = Study.objects.create(title=f"{fmt} bench", slug=slug)
    started, cpu = time.perf_counter(), time.process_time()
    call_command("import_votes", path, "--format", fmt, "--study", slug, verbosity=0)
    imported, imported_cpu = time.perf_counter() - started, time.process_time() - cpu
    started, cpu = time.perf_counter(), time.process_time()
    result = current_report.study_analyze(study=study)
    analysed, analysed_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        json.dumps(
            {
                "format": fmt,
                "import_s": imported,
                "import_cpu_s": imported_cpu,
                "analyze_s": analysed,
                "analyze_cpu_s": analysed_cpu,
                "votes": Vote.objects.filter(item__study=study).count(),
                "judges": len(result["judges"]),
                # ru_maxrss is in KiB on Linux.
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", default=",".join(DATASETS), help="one format or a comma list (default: all)")
    parser.add_argument("--path", help="the data set (one format only); default: its shared copy")
    parser.add_argument("--database-url", help="default: a new SQLite file per run; PostgreSQL: recreated per run")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    if unknown := [f for f in formats if f not in DATASETS]:
        parser.error(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(DATASETS)}")
    if args.path and len(formats) != 1:
        parser.error("--path names the data set of one format")
    if args.once:
        once(args.database_url, formats[0], args.path)
        return
    for fmt in formats:
        path = args.path or str(DATASETS[fmt]())
        runs = [run(fmt, path, args.database_url) for _ in range(args.repeat)]
        for key in (*TIMES, "peak_rss_mib"):
            values = [r[key] for r in runs]
            unit = "MiB" if key == "peak_rss_mib" else "s"
            print(
                f"{fmt} {key}: median {statistics.median(values):.2f} {unit} "
                f"(runs: {', '.join(f'{v:.2f}' for v in values)})",
                flush=True,
            )


def run(fmt: str, path: str, database_url: str | None) -> dict:
    """One run in a fresh process on a fresh database; its figures, printed as they come."""
    with tempfile.TemporaryDirectory() as tmp:
        url = database_url or f"sqlite:///{tmp}/bench.sqlite3"
        if url.startswith("postgres"):
            _recreate_postgres(url)
        out = subprocess.run(
            [sys.executable, __file__, "--once", "--format", fmt, "--database-url", url, "--path", path],
            check=True,
            stdout=subprocess.PIPE,  # the figures; a failing run's traceback goes to the terminal
            text=True,
        ).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(figures), flush=True)
    return figures


def _recreate_postgres(url: str) -> None:
    """Drop and create the benchmark's PostgreSQL database (named in the URL) so every run is fresh."""
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
