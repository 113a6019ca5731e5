"""The same reads of the rater's hot path through the ORM and as written-out statements
(biasstudy/rawsql.py says why the hot path is written out), on a fresh SQLite database seeded
like bench_rater_flow.py.

    python bench/bench_orm_vs_sql.py --loops 2000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=2000)
    parser.add_argument("--questions", type=int, default=500)
    args = parser.parse_args()
    from bench.django_env import setup_django

    setup_django(f"sqlite:///{tempfile.mkdtemp()}/orm_vs_sql.sqlite3")
    from annotations import assignment
    from annotations.models import Lease, Rater, Study
    from bench.bench_rater_flow import SLUG, seed

    seed(args.questions, 4)
    study = Study.objects.get(slug=SLUG)
    rater = assignment.rater_enter(study=study, participant_id="P1")
    rater.study = study
    lease = assignment.lease_next(rater=rater)

    reads = {
        "rater with study": (
            lambda: Rater.objects.select_related("study").get(pk=rater.pk, study__slug=SLUG),
            lambda: assignment.rater_with_study(assignment.RaterRef(rater.pk, study.pk, SLUG)),
        ),
        "lease with item, question and both answers": (
            lambda: Lease.objects.select_related("item__question", "item__answer_a1", "item__answer_a2").get(
                pk=lease.pk
            ),
            lambda: assignment._lease_page("l.id = %s", [lease.pk]),
        ),
    }
    print(f"{args.loops} loops each, load {os.getloadavg()[0]:.2f}\n")
    print("| read | ORM | written out |\n|---|---|---|")
    for name, (orm, written) in reads.items():
        assert orm() is not None and written() is not None
        times = [min(timeit.repeat(f, number=args.loops, repeat=3)) / args.loops * 1000 for f in (orm, written)]
        print(f"| {name} | {times[0]:.3f} ms | {times[1]:.3f} ms |")


if __name__ == "__main__":
    main()
