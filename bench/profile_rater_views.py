"""Profile the task page and the vote in process (pyinstrument), on a fresh SQLite database
seeded like bench_rater_flow.py, with the slowest SQL statements listed, and the median CPU
time of this process per page and per vote (steadier than wall time on a shared machine; the
database server's own CPU is not in it).

    python bench/profile_rater_views.py --loops 200 --questions 6000 [--html profile.html]
    python bench/profile_rater_views.py --postgres --loops 400 --no-profile   # CPU medians only
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--questions", type=int, default=6000)
    parser.add_argument("--html", help="write pyinstrument's HTML report here")
    parser.add_argument("--postgres", action="store_true", help="on a fresh PostgreSQL database (BENCH_POSTGRES_URL)")
    parser.add_argument("--no-profile", action="store_true", help="no pyinstrument: only the timings")
    args = parser.parse_args()
    from bench.bench_rater_flow import rater_in_process

    with rater_in_process(args.questions, postgres=args.postgres) as cycle:
        run(args, cycle)


def run(args: argparse.Namespace, cycle) -> None:
    from django.db import connection
    from pyinstrument import Profiler

    def loop(n: int, timings: dict) -> None:
        for _ in range(n):
            for kind, seconds in zip(("page", "submit", "page CPU", "submit CPU"), cycle(), strict=True):
                timings[kind].append(seconds)

    loop(5, defaultdict(list))  # warm up
    timings: dict = defaultdict(list)
    by_sql: dict = defaultdict(lambda: [0, 0.0])

    def timed(execute, sql, params, many, context):
        # Grouped by the statement as written (placeholders, not values); savepoint names vary.
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            key = re.sub(r'"s\d+_x\d+"', '"<savepoint>"', sql)[:150]
            by_sql[key][0] += 1
            by_sql[key][1] += time.perf_counter() - started

    with connection.execute_wrapper(timed):
        loop(100, timings)
    in_statements = sum(total for _, total in by_sql.values()) / 100 * 1000
    cycle_ms = sum(timings["page"] + timings["submit"]) / 100 * 1000
    count = sum(n for n, _ in by_sql.values()) / 100
    print(f"{count:.1f} statements per page+vote, {in_statements:.2f} ms of {cycle_ms:.2f} ms in them (100 loops):")
    for sql, (n, total) in sorted(by_sql.items(), key=lambda kv: -kv[1][1]):
        print(f"  {n / 100:4.2f} x {1000 * total / n:5.3f} ms  {sql}")
    timings = defaultdict(list)
    profiler = Profiler(interval=0.0005)
    if not args.no_profile:
        profiler.start()
    loop(args.loops, timings)
    if not args.no_profile:
        profiler.stop()
    for kind, values in timings.items():
        values.sort()
        print(
            f"{kind}: mean {1000 * sum(values) / len(values):.1f} ms, median {1000 * values[len(values) // 2]:.1f} ms"
        )
    print(f"load {os.getloadavg()}")
    if args.no_profile:
        return
    print(profiler.output_text(unicode=False, color=False, show_all=False))
    if args.html:
        Path(args.html).write_text(profiler.output_html())


if __name__ == "__main__":
    main()
