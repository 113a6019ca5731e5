"""Benchmark of the dashboard's figures: drawing and saving each one, as SVG and as PNG.

    python bench/bench_plots.py                    # 1,000 questions, 5 judges
    python bench/bench_plots.py --questions 200 --judges 8

The report is made once from a synthetic frame (bench_analysis.synthetic_frame) and not timed;
the timed part is ``plots.draw`` + ``plots.render``, what one figure request costs on top of
reading the stored report (a browser that has the figure of an unchanged report gets a 304).
Figures depend on the number of judges, groups and Bloom levels, not on votes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from analysis import compute, plots
    from bench.bench_analysis import synthetic_frame

    result = compute.analyze(synthetic_frame(args.questions, args.judges, 2), study="bench")
    plots.render(plots.draw("forest", result)[0], "svg")  # fonts and caches warmed, not timed
    print(f"{args.questions} questions, {args.judges} judges; median of {args.repeat} (seconds)")
    total = {"svg": 0.0, "png": 0.0}
    for name in plots.PLOTS:
        line = [f"{name:<10}"]
        for fmt in ("svg", "png"):
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                body = plots.render(plots.draw(name, result)[0], fmt)
                times.append(time.perf_counter() - start)
            total[fmt] += statistics.median(times)
            line.append(f"{fmt} {statistics.median(times):.3f} ({len(body) // 1024} KiB)")
        print("  ".join(line))
    print(f"all six: svg {total['svg']:.2f}, png {total['png']:.2f}")


if __name__ == "__main__":
    main()
