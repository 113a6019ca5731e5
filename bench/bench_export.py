"""Benchmark of the votes CSV export (analysis.exports) on a million votes in SQLite: rows per
second and the peak memory (RSS) of the exporting process, which must stay under 300 MB.

    python bench/bench_export.py                     # 1,000,000 votes, export repeated 3 times
    python bench/bench_export.py --votes 100000 --repeat 1

A fresh SQLite file is migrated and seeded (bench_analysis.seed_study: control items, five
simulated judges × six votes, bulk_create; not timed). Each export then runs in its own fresh
process, so that process's peak RSS (ru_maxrss) is the export's, Django's own footprint included:
it streams exports.csv_lines(exports.votes_rows(study)) into a file, as the export command does.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = sys.executable


def _env(db: Path) -> dict:
    from bench.django_env import bench_env

    return bench_env(f"sqlite:///{db}", settings="biasstudy.settings")


def seed(n_votes: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    from annotations.models import Vote
    from bench.bench_analysis import seed_study

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    study = seed_study(n_votes, slug="export")
    print(
        json.dumps(
            {"votes": Vote.objects.filter(item__study=study).count(), "seed_s": round(time.perf_counter() - started, 1)}
        )
    )


def export(out: str) -> None:
    import django

    django.setup()
    from analysis import exports
    from annotations.models import Study

    study = Study.objects.get(slug="export")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), time.process_time()
    rows = 0
    with open(out, "w", newline="") as f:
        for line in exports.csv_lines(exports.votes_rows(study)):
            f.write(line)
            rows += 1
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "rows": rows - 1,  # the header
                "seconds": seconds,
                "cpu_seconds": time.process_time() - cpu,
                "rows_per_s": (rows - 1) / seconds,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "rss_before_mb": rss_before,
                "file_mb": os.path.getsize(out) / 2**20,
                "load": [load, os.getloadavg()[0]],
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", help="reuse this SQLite file if it is already seeded (else it is seeded)")
    parser.add_argument("--child", choices=["seed", "export"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "seed":
        seed(args.votes)
        return
    if args.child == "export":
        export(args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "export.sqlite3"
        env = _env(db)

        def child(*extra: str) -> dict:
            done = subprocess.run(
                [PYTHON, __file__, "--votes", str(args.votes), *extra],
                env=env, cwd=ROOT, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(done.stderr[-3000:])
            return json.loads(done.stdout.strip().splitlines()[-1])

        if not db.exists():
            print(f"seeded: {child('--child', 'seed')}", flush=True)
        runs = []
        for _ in range(args.repeat):
            runs.append(child("--child", "export", "--out", str(Path(tmp) / "votes.csv")))
            r = runs[-1]
            print(
                f"export: {r['rows']:,} rows in {r['seconds']:.1f} s = {r['rows_per_s']:,.0f} rows/s "
                f"(CPU {r['cpu_seconds']:.1f} s), peak RSS {r['peak_rss_mb']:.0f} MB (after setup "
                f"{r['rss_before_mb']:.0f} MB), file {r['file_mb']:.0f} MB, load {r['load'][0]:.2f}",
                flush=True,
            )
        rates = [r["rows_per_s"] for r in runs]
        peaks = [r["peak_rss_mb"] for r in runs]
        print(
            f"rows/s best {max(rates):,.0f}, median {statistics.median(rates):,.0f}; "
            f"peak RSS max {max(peaks):.0f} MB (target < 300 MB: {'met' if max(peaks) < 300 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
