"""CPU per render of the demo study's instructions (fixtures/demo_study.json, 1,114 characters),
what the task page would spend on every view if a study's instructions were not stored rendered
(Study.instructions_html).

    python bench/bench_instructions_render.py --renders 200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from biasstudy import rendering  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--renders", type=int, default=200)
    args = parser.parse_args()
    text = json.loads((ROOT / "fixtures" / "demo_study.json").read_text(encoding="utf-8"))["study"]["instructions"]
    rendering.render_markdown(text)  # the thread's converter and cleaner are built once
    cpu = time.process_time()
    for _ in range(args.renders):
        rendering.render_markdown(text)
    print(f"{len(text)} characters: {(time.process_time() - cpu) / args.renders * 1000:.2f} ms CPU per render")


if __name__ == "__main__":
    main()
