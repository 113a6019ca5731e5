"""Throughput of a judge run against an OpenAI-compatible server on loopback.

    python bench/bench_judge_run.py [--items 100] [--concurrency 16] [--repeat 5]

Two cases, each comparing votes stored per second by a real run (planning, prompts, cache
look-ups, parsing, batched writes to a throw-away SQLite database) with a reference:
  1. the server answers at once: reference = the bare `openai` client sending the same
     requests from the same number of threads (target: run >= 90% of it);
  2. the server answers after 200 ms: reference = concurrency / 0.2 s (target: >= 90%).
The server (tests/judge_server.py) runs in its own process so it does not share our GIL.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def serve(delay: float, pipe) -> None:
    from tests.judge_server import JudgeServer

    with JudgeServer(delay=delay) as server:
        pipe.send(server.base_url)
        pipe.recv()  # until told to stop


def setup_django(db_path: str) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.environ["DJANGO_SETTINGS_MODULE"] = "biasstudy.settings"
    os.environ.setdefault("DJANGO_LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def make_study(items: int):
    from annotations.models import Answer, ComparisonItem, Question, Study

    study = Study.objects.create(title="bench", slug=f"bench-{time.time_ns()}")
    for n in range(items):
        question = Question.objects.create(
            study=study, external_id=f"q{n}", text=f"Question {n}?", bloom_level="remembering"
        )
        a1 = Answer.objects.create(question=question, external_id="a1", text=f"A GOOD answer number {n}.")
        a2 = Answer.objects.create(question=question, external_id="a2", text=f"A weak answer number {n}.")
        ComparisonItem.objects.create(study=study, question=question, answer_a1=a1, answer_a2=a2)
    return study


def bench_run(study, base_url: str, concurrency: int) -> tuple[float, int]:
    from judges.services import judge_run_execute, judge_run_start, llm_judge_create

    config = llm_judge_create(
        name=f"bench-{time.time_ns()}", backend="openai_compatible", model=f"bench-{time.time_ns()}",
        base_url=base_url, prompt_style="vote_only", votes_per_item=6, concurrency=concurrency, logprobs=True,
        invalid_retries=0, max_tokens=8,
    )  # fmt: skip
    run = judge_run_start(study=study, judge=config.judge, enqueue=False)
    started = time.perf_counter()
    run = judge_run_execute(run_id=run.pk)
    elapsed = time.perf_counter() - started
    ok = run.votes.filter(parse_status="ok").count()
    assert ok == run.total, f"only {ok}/{run.total} votes parsed: {run.progress()['last_errors']}"
    return ok / elapsed, ok


def bench_bare_client(study, base_url: str, concurrency: int) -> float:
    import httpx
    import openai

    from judges.plan import item_rounds
    from judges.prompts import DEFAULT_SYSTEM_TEMPLATE, DEFAULT_USER_TEMPLATE, label_scheme, render_messages

    items = list(study.items.select_related("question", "answer_a1", "answer_a2").order_by("id"))
    prompts = []
    for index, item in enumerate(items):
        for planned in item_rounds(votes_per_item=6, schemes=["answer12"], item_index=index):
            first, second = (
                (item.answer_a1, item.answer_a2) if planned.shown_first == "a1" else (item.answer_a2, item.answer_a1)
            )
            prompts.append(
                render_messages(
                    system_template=DEFAULT_SYSTEM_TEMPLATE,
                    user_template=DEFAULT_USER_TEMPLATE,
                    style="vote_only",
                    question=item.question.text,
                    first=first.text,
                    second=second.text,
                    scheme=label_scheme("answer12").in_order(planned.label_order),
                )  # fmt: skip
            )
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = openai.OpenAI(base_url=base_url, api_key="no-key", max_retries=0, http_client=httpx.Client(limits=limits))

    def ask(messages):
        return (
            client.chat.completions.create(
                model="bare", messages=messages, max_tokens=8, temperature=0, logprobs=True, top_logprobs=5
            )
            .choices[0]
            .message.content
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        answers = list(pool.map(ask, prompts))
    elapsed = time.perf_counter() - started
    assert len(answers) == len(prompts)
    return len(prompts) / elapsed


def with_server(delay: float, work):
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=serve, args=(delay, child), daemon=True)
    process.start()
    try:
        return work(parent.recv())
    finally:
        parent.send("stop")
        process.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5, help="pairs of (reference, run) per case, order alternating")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(str(Path(tmp) / "bench.sqlite3"))
        study = make_study(args.items)
        c = args.concurrency

        def pairs(base_url):
            bare, runs = [], []
            for r in range(args.repeat):
                steps = [lambda: bare.append(bench_bare_client(study, base_url, c)),
                         lambda: runs.append(bench_run(study, base_url, c))]  # fmt: skip
                for step in steps if r % 2 == 0 else steps[::-1]:
                    step()
            return bare, [rate for rate, _ in runs], runs[0][1]

        bare, run_fast, votes = with_server(0.0, pairs)
        delayed_bare, delayed_run, delayed_votes = with_server(0.2, pairs)
    ideal = c / 0.2
    rows = [
        ("server answers at once", f"bare openai client, {c} threads", bare, run_fast, votes),
        ("server answers after 200 ms", f"concurrency / 0.2 s = {c} / 0.2", [ideal], delayed_run, delayed_votes),
        ("server answers after 200 ms", f"bare openai client, {c} threads", delayed_bare, delayed_run, delayed_votes),
    ]
    print(f"{args.repeat} repeats per case; votes/s as median (min-max); ratio of the medians")
    print(f"{'case':<28} {'reference':<34} {'reference votes/s':>22} {'run votes/s':>22} {'ratio':>6} {'votes':>6}")
    for case, reference, ref, run, n in rows:
        print(f"{case:<28} {reference:<34} {_spread(ref):>22} {_spread(run):>22} "
              f"{statistics.median(run) / statistics.median(ref):>6.0%} {n:>6}")  # fmt: skip
    print(f"(cpus: {os.cpu_count()}, load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())})")


def _spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.0f}-{max(values):.0f})"


if __name__ == "__main__":
    main()
