"""Benchmark of the mixed model (analysis.mixed_effects) against a known truth: bias and 95%
interval coverage over many simulated studies, and the CPU time of one fit.

    python bench/bench_mixed_effects.py                     # 400 studies of each design
    python bench/bench_mixed_effects.py --studies 100 --scaling

Each study is ``simulate.crossed_votes``: 150 raters and 120 questions (a control item and two
perturbed items each, the perturbed original alternating between A2 and A1), 6,000 votes, each a
rater, an item and a display order drawn at random (and a smaller design: 40 raters, 60
questions, 2,000 votes), from the model itself with the truth below
(log-odds): factual_error −1.0, reference +0.5, position +0.3, rater SD 0.8, question SD 1.2,
10% ties (left out by the model). Reported per figure: the mean estimate and its bias (absolute
for the effects, relative for the SDs), the share of studies whose 95% interval covers the truth
with its binomial standard error, and the median CPU time of a fit (the design, gpboost's fit and
the standard errors). ``--scaling`` also times single fits at the sizes the module's limits are
set from. The figures go into docs/BENCHMARKS.md ("Mixed model").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402


def one_study(seed: int, truth, *, n_questions: int = 120, n_raters: int = 150, n_votes: int = 6000):
    from analysis import metrics, mixed_effects, simulate

    frame = simulate.crossed_votes(n_questions=n_questions, n_raters=n_raters, n_votes=n_votes, truth=truth, seed=seed)
    roots = metrics.item_preferences(frame)[["item_id", "a1_root", "a2_root"]]
    cpu = time.process_time()
    found = mixed_effects.fit(frame, roots, list(truth.effects))
    return found, time.process_time() - cpu


def figures(found, truth) -> dict[str, tuple[float | None, tuple, float]]:
    """{figure: (estimate, interval, truth)}."""
    out = {f"effect {g}": (found.effects[g], t) for g, t in truth.effects.items()}
    out["position"] = (found.position, truth.position)
    result = {name: (e.value if e else None, e.ci if e else (None, None), t) for name, (e, t) in out.items()}
    for name, spread, t in (
        ("SD raters", found.sd_rater, truth.sd_rater),
        ("SD questions", found.sd_question, truth.sd_question),
    ):
        result[name] = (spread.value if spread else None, spread.ci if spread else (None, None), t)
    return result


# The design, and a smaller one (about 33 votes per rater and per question).
DESIGNS = {
    "150 raters x 120 questions, 6,000 votes": {"n_questions": 120, "n_raters": 150, "n_votes": 6000},
    "40 raters x 60 questions, 2,000 votes": {"n_questions": 60, "n_raters": 40, "n_votes": 2000},
}


def coverage_table(label: str, design: dict, truth, studies: int) -> None:
    """Print the design's bias and coverage table (markdown) and its CPU time per fit."""
    rows: dict[str, list] = {}
    cpus, not_fitted = [], 0
    for seed in range(studies):
        found, cpu = one_study(seed, truth, **design)
        cpus.append(cpu)
        if found.note:
            not_fitted += 1
            continue
        for name, (value, ci, t) in figures(found, truth).items():
            rows.setdefault(name, []).append((value, ci, t))
    print(
        f"{studies} studies of {label} (10% ties), not fitted: {not_fitted}; "
        f"CPU per fit: median {statistics.median(cpus):.2f} s, max {max(cpus):.2f} s"
    )
    print()
    print("| figure | truth | mean estimate | bias | 95% intervals covering | studies without an interval |")
    print("|---|---|---|---|---|---|")
    for name, found in rows.items():
        t = found[0][2]
        values = np.array([v for v, _, _ in found if v is not None], dtype=float)
        with_ci = [(lo, hi) for _, (lo, hi), _ in found if lo is not None]
        covered = np.array([lo <= t <= hi for lo, hi in with_ci], dtype=float)
        share = covered.mean() if len(covered) else float("nan")
        se = np.sqrt(share * (1 - share) / len(covered)) if len(covered) else float("nan")
        bias = values.mean() - t
        bias_text = f"{bias:+.3f}" if name.startswith(("effect", "position")) else f"{bias / t:+.1%}"
        print(
            f"| {name} | {t:g} | {values.mean():.3f} | {bias_text} | {share:.1%} ± {se:.1%} ({len(covered)}) | "
            f"{len(found) - len(with_ci)} |"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=400)
    parser.add_argument("--scaling", action="store_true", help="also time single fits at bigger sizes")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from analysis import simulate

    truth = simulate.CrossedTruth(
        effects={"factual_error": -1.0, "reference": 0.5}, position=0.3, sd_rater=0.8, sd_question=1.2, tie_rate=0.1
    )
    for label, design in DESIGNS.items():
        coverage_table(label, design, truth, args.studies)
    if args.scaling:
        from analysis import mixed_effects

        print()
        for n_votes, n_raters, n_questions in ((6000, 150, 120), (30_000, 600, 600), (200_000, 1, 30_000)):
            found, cpu = one_study(0, truth, n_questions=n_questions, n_raters=n_raters, n_votes=n_votes)
            print(
                f"{n_votes:,} votes, {n_raters} raters x {n_questions:,} questions "
                f"({found.terms}; limits {mixed_effects.MAX_VOTES_WITH_RATERS:,} with raters, "
                f"{mixed_effects.MAX_VOTES:,}): {cpu:.2f} s CPU"
            )


if __name__ == "__main__":
    main()
