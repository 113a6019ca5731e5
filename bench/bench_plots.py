"""Benchmark of the dashboard's figures: drawing and saving each one, as SVG and as PNG.

    python bench/bench_plots.py                    # 1,000 questions, 5 judges
    python bench/bench_plots.py --questions 200 --judges 8
    python bench/bench_plots.py --page 30000       # a dashboard page and its six figures

The report is made once from a synthetic frame (bench_analysis.synthetic_frame) and not timed;
the timed part is ``plots.draw`` + ``plots.render``, what one figure request costs on top of
the analysis. Figures depend on the number of judges, groups and Bloom levels, not on votes.

``--page N``: N votes written to a throwaway SQLite database (or $DATABASE_URL's server, test
database) as bench_analysis.seed_study does, then a staff client asks for the dashboard page and
its six SVG figures, as a browser does, with the database cache of production: first with an
empty cache, then again (the 10-second refresh, nothing new), then with a cache that keeps
nothing (every request analyses, as before the report was cached).
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


def bench_page(n_votes: int, repeat: int) -> None:
    os.environ["CACHE_URL"] = ""  # production's default: a table of the database
    os.environ.setdefault("SQLITE_TEST_NAME", str(Path(tempfile.gettempdir()) / "bench_plots.sqlite3"))
    import django

    django.setup()
    from django.core.cache import cache
    from django.test import Client, override_settings
    from django.test.runner import DiscoverRunner
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from analysis import plots
    from bench.bench_analysis import seed_study
    from tests.factories import make_staff

    setup_test_environment()
    runner = DiscoverRunner(verbosity=0, interactive=False)  # a test database left behind is replaced
    old = runner.setup_databases()
    try:
        study = seed_study(n_votes)
        client = Client()
        client.force_login(make_staff())
        urls = [reverse("analysis:study", args=[study.slug])]
        urls += [reverse("analysis:plot", args=[study.slug, name, "svg"]) for name in plots.PLOTS]

        def page() -> float:
            started = time.perf_counter()
            for url in urls:
                assert client.get(url).status_code == 200, url
            return time.perf_counter() - started

        cold, warm, uncached = [], [], []
        for _ in range(repeat):
            cache.clear()
            cold.append(page())
            warm.append(page())
            with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}):
                uncached.append(page())
        print(
            f"dashboard page + {len(plots.PLOTS)} SVG figures, {n_votes:,} votes ({django.db.connection.vendor}); "
            f"median of {repeat} (seconds)"
        )
        print(f"  no cache (each request analyses): {statistics.median(uncached):.2f}")
        print(f"  empty cache (the page analyses, the figures reuse): {statistics.median(cold):.2f}")
        print(f"  refresh, nothing new (all from the cache): {statistics.median(warm):.2f}")
    finally:
        runner.teardown_databases(old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--page", type=int, default=0, help="time a dashboard page and its figures over this many votes"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    if args.page:
        bench_page(args.page, args.repeat)
        return
    import django

    django.setup()
    from analysis import plots, report
    from bench.bench_analysis import synthetic_frame

    result = report.analyze(synthetic_frame(args.questions, args.judges, 2), study="bench")
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
