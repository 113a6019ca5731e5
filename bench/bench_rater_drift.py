"""One rater voting thousands of times, in process: does a page + vote get slower as the rater's
votes pile up? Prints, per chunk of votes, the mean page + vote cycle (Django's WSGI handler
called in process, no HTTP: `bench_rater_flow.WsgiClient`).

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
    for done in range(args.chunk, args.votes + 1, args.chunk):
        started = time.perf_counter()
        for _ in range(args.chunk):
            cycle()
        mean_cycle = (time.perf_counter() - started) / args.chunk * 1000
        print(f"  votes {done:>6}: page + vote {mean_cycle:6.2f} ms", flush=True)
    stored = Vote.objects.filter(rater__participant_id="P1").count()
    print(f"stored {stored} votes for {args.votes} submits")
    assert stored == args.votes


if __name__ == "__main__":
    main()
