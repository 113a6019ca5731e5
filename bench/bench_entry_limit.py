"""CPU per count of the rater entry limit (annotations.ratelimit.hit), in process on a fresh
SQLite file: 2,000 clients entering once each, then 2,000 entries of one client (30/minute: all
but 30 refused). No floor times an entry (section 1.1 enters untimed); this says what the
limit's shared count costs.

    python bench/bench_entry_limit.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from bench.django_env import setup_django

    with tempfile.TemporaryDirectory() as tmp:
        setup_django(f"sqlite:///{tmp}/entries.sqlite3")
        from annotations import ratelimit

        cpu, wall = time.process_time(), time.perf_counter()
        for n in range(2000):
            ratelimit.hit("enter", f"10.0.{n // 250}.{n % 250}", rate=(30, 60))
        for _ in range(2000):
            ratelimit.hit("enter", "10.9.9.9", rate=(30, 60))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"per count: {cpu / 4000 * 1000:.3f} ms CPU, {wall / 4000 * 1000:.3f} ms wall (4,000 counts)")


if __name__ == "__main__":
    main()
