"""One rater voting thousands of times, in process: does a page + vote get slower as the rater's
votes pile up? Prints, per chunk of votes, the mean page + vote cycle (Django's WSGI handler
called in process, no HTTP: `bench_rater_flow.WsgiClient`), in wall time, in this process's CPU
time and, on PostgreSQL, in the CPU time of the server process serving its connection (read
from /proc: the server must run on this machine, as the benchmarks' loopback one does).

    python bench/bench_rater_drift.py --votes 4000 --chunk 500 [--postgres [--analyze-empty]]

Seeds like bench_rater_flow.py (--questions questions, two items each, one variant per
question), on a fresh SQLite file or a fresh PostgreSQL database (BENCH_POSTGRES_URL), removed
afterwards. On PostgreSQL the seeded tables are analysed and the empty lease and vote tables
are not, as on a fresh deployment; --analyze-empty analyses those too, while empty, which makes
the connection's prepared statements plan every lease lookup as a scan of a tiny table
(docs/BENCHMARKS.md, 1.7; docs/DEPLOY.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--votes", type=int, default=4000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--questions", type=int, default=6000)
    parser.add_argument("--postgres", action="store_true", help="on a fresh PostgreSQL database (BENCH_POSTGRES_URL)")
    parser.add_argument("--analyze-empty", action="store_true", help="PostgreSQL: analyse the empty tables too")
    args = parser.parse_args()
    if args.votes > args.questions:
        parser.error("--votes must not exceed --questions (one vote per question)")
    from bench.bench_rater_flow import rater_in_process

    with rater_in_process(args.questions, postgres=args.postgres, analyze_empty=args.analyze_empty) as cycle:
        run(args, cycle)


def run(args: argparse.Namespace, cycle) -> None:
    from django.db import connection

    from annotations.models import Vote

    print(f"{connection.vendor}: one rater, {args.votes} votes, {args.questions} questions")
    with connection.cursor() as cursor:  # one cursor, so that only the round trip is timed

        def select_one() -> None:
            cursor.execute("SELECT 1")
            cursor.fetchone()

        print(f"  a round trip alone (SELECT 1, 2000 times): {_per_step(2000, select_one, digits=3)}")
    for done in range(args.chunk, args.votes + 1, args.chunk):
        print(f"  votes {done:>6}: page + vote {_per_step(args.chunk, cycle, digits=2)}", flush=True)
    stored = Vote.objects.filter(rater__participant_id="P1").count()
    print(f"stored {stored} votes for {args.votes} submits")
    assert stored == args.votes


def _per_step(times: int, step, *, digits: int) -> str:
    """Run `step` `times` times; what one run cost, as text: wall time, this process's CPU time
    and, on PostgreSQL, the CPU time of the server process on its connection (left out when
    the connection reached its age and was replaced meanwhile)."""
    backend = _backend_pid()
    started = _clocks(backend)
    for _ in range(times):
        step()
    if backend != _backend_pid():
        backend = None
    ended = _clocks(backend)
    wall, cpu, server = (1000 * (end - start) / times for end, start in zip(ended, started, strict=True))
    text = f"{wall:{digits + 4}.{digits}f} ms, CPU {cpu:.{digits}f} ms"
    return text + (f", PostgreSQL's CPU {server:.{digits}f} ms" if backend else "")


def _backend_pid() -> int | None:
    """On PostgreSQL the id of the server process serving this process's connection."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _clocks(server_pid: int | None) -> tuple[float, float, float]:
    """Wall time, this process's CPU time and the CPU time (user + system) of the server process
    with this id (0 without one), in seconds."""
    server = 0.0
    if server_pid is not None:
        with open(f"/proc/{server_pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return time.perf_counter(), time.process_time(), server


if __name__ == "__main__":
    main()
