"""Speed of the in-process local judge (SmolLM2-135M GGUF through llama-cpp-python, vote-only
prompts scored from the logits) on the first questions of the demo study.

    python bench/bench_local_judge.py [--questions 6] [--votes-per-item 4] [--repeat 3]

A fresh SQLite file gets the demo study cut to its first --questions questions (all their items,
gold included); the demo judge (judges.services.llm_judge_demo_create) then runs over it with
--votes-per-item votes per item, executed inline (judge_run_execute), timed from start to the
last stored vote. The judge's response cache is emptied before each repeat so every vote is
computed. The runner orders identical prompts next to each other, so the repeated votes of one
item in one display order reuse the evaluated prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--votes-per-item", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    from bench.django_env import setup_django

    setup_django(f"sqlite:///{tmp / 'judge.sqlite3'}", settings="biasstudy.settings")
    from annotations.study_files import study_import
    from judges.models import CachedResponse, JudgeRun
    from judges.services import judge_run_execute, judge_run_start, llm_judge_demo_create

    demo = json.loads((ROOT / "fixtures" / "demo_study.json").read_text())
    demo["questions"] = demo["questions"][: args.questions]
    demo["gold_items"] = demo["gold_items"][:1]
    small = tmp / "demo_small.json"
    small.write_text(json.dumps(demo))
    study = study_import(path=small, fmt="biasstudy")
    config = llm_judge_demo_create()
    items = study.items.count()
    print(f"{items} items ({args.questions} demo questions + 1 gold), {args.votes_per_item} votes per item")
    rates = []
    for r in range(args.repeat):
        CachedResponse.objects.all().delete()
        load = os.getloadavg()[0]
        run = judge_run_start(study=study, judge=config.judge, votes_per_item=args.votes_per_item, enqueue=False)
        started, cpu = time.perf_counter(), time.process_time()
        run = judge_run_execute(run_id=run.pk)
        seconds = time.perf_counter() - started
        votes = run.votes.filter(parse_status="ok").count()
        assert run.status == JudgeRun.Status.DONE, run.status
        rates.append(votes / seconds)
        print(
            f"run {r + 1}{' (loads the model)' if r == 0 else ''}: {votes} votes in {seconds:.2f} s = "
            f"{votes / seconds:.1f} votes/s (CPU {time.process_time() - cpu:.1f} s), "
            f"load {load:.2f} -> {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    print(f"votes/s best {max(rates):.1f}, median {statistics.median(rates):.1f}")


if __name__ == "__main__":
    main()
