"""Benchmark of the "how many votes do I need" page's simulation (analysis.power.power_table)
at the form's maxima (2,000 questions, 10,000 raters, 1,000 items per rater), for a study with
3, 30 and 100 perturbation kinds.

    python bench/bench_power.py                  # 3, 30 and 100 kinds, once each
    python bench/bench_power.py --kinds 3 100 --repeat 3

The kinds are the three built-in ones, then made-up ones alternating non-semantic and degrading
(what power_groups gives a study's own kinds: no words added). The page's whole cost is this
call: the view adds a few queries.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MAXIMA = {"n_questions": 2000, "raters": 10_000, "items_per_rater": 1000}


def kinds(n: int) -> dict[str, tuple[str, int]]:
    from analysis import simulate

    groups = dict(list(simulate.SYNTHETIC_GROUPS.items())[:n])
    for index in range(len(groups), n):
        groups[f"kind_{index}"] = ("degrading" if index % 2 else "non_semantic", 0)
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", type=int, nargs="+", default=[3, 30, 100])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from analysis import power

    print(f"power_table at the form's maxima {MAXIMA}; median of {args.repeat} (seconds)")
    for n in args.kinds:
        walls, cpus = [], []
        for _ in range(args.repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            table = power.power_table(**MAXIMA, susceptibility=0.5, noise=1.0, tie_rate=0.15, groups=kinds(n))
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        votes = table.get("simulated_votes", "not counted")
        simulated = len(table.get("simulated_groups", table["groups"]))
        print(
            f"{n:>4} kinds: wall {statistics.median(walls):7.2f}  cpu {statistics.median(cpus):7.2f}  "
            f"kinds simulated {simulated:>3}  simulated votes {votes}"
        )


if __name__ == "__main__":
    main()
