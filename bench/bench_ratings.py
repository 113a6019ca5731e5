"""Benchmark of the systems' ratings (analysis.ratings) on a simulated 100,000-vote study: 10
systems, 2,000 prompts, every vote's answers with style counts; the plain and the
style-controlled fit, each with 100 rounds of the prompt bootstrap (what the report computes
for one judge: analysis.rating_metrics.ROUNDS).

    python bench/bench_ratings.py                 # 100,000 votes, 100 rounds
    python bench/bench_ratings.py --votes 1000000 --rounds 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def study(votes: int, systems: int = 10, prompts: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    strength = np.linspace(0, 300, systems)
    a = rng.integers(0, systems, votes)
    b = (a + rng.integers(1, systems, votes)) % systems
    frame = pd.DataFrame({"a1_system": [f"s{k}" for k in a], "a2_system": [f"s{k}" for k in b]})
    frame["cluster_id"] = rng.integers(0, prompts, votes)
    style = {}
    for side in ("a1", "a2"):
        style[side] = {
            "tokens": rng.lognormal(5.5, 0.5, votes).round(),
            "headers": rng.poisson(0.5, votes).astype(float),
            "lists": rng.poisson(3, votes).astype(float),
            "bold": rng.poisson(1, votes).astype(float),
        }
        for f, values in style[side].items():
            frame[f"style_{side}_{f}"] = values
    t1, t2 = style["a1"]["tokens"], style["a2"]["tokens"]
    logit = np.log(10) * (strength[a] - strength[b]) / 400 + 1.0 * (t1 - t2) / (t1 + t2 + 1)
    draw = rng.random(votes)
    p = 1 / (1 + np.exp(-logit))
    frame["choice"] = np.where(draw < 0.1, "tie", np.where(draw < 0.1 + 0.9 * p, "a1", "a2"))
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    from analysis import ratings

    frame = study(args.votes)
    with threadpool_limits(1):  # as the report runs it
        for style in (False, True):
            cpu, wall = time.process_time(), time.perf_counter()
            fit = ratings.rate(frame, style=style, rounds=args.rounds, seed=0)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            kind = "style-controlled" if style else "plain"
            print(
                f"{kind:>16}: {args.votes} votes, {args.rounds} rounds: {cpu:.2f} s CPU, {wall:.2f} s wall ({fit.note or 'ok'})"
            )


if __name__ == "__main__":
    main()
