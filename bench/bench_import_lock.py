"""How long a large study or vote import holds SQLite's write lock (raters cannot vote meanwhile).

    python bench/bench_import_lock.py               # a 60 MB biasstudy file
    python bench/bench_import_lock.py --mb 10
    python bench/bench_import_lock.py --votes llmbar    # a vote data set instead (llmbar, prd, mtbench)
    python bench/bench_import_lock.py --mb 10 --postgres postgres://biasstudy:biasstudy@127.0.0.1:5432/biasstudy_import

A biasstudy document of about --mb megabytes is written (questions with four answers each: two
originals and two variants, a few KB of Markdown per answer), then imported with
`manage.py import_study` into a fresh SQLite file (the production settings: WAL, IMMEDIATE).
Meanwhile a probe in this process takes the write lock (BEGIN IMMEDIATE; COMMIT) every 10 ms, as
a rater's vote would, and records how long it had to wait each time. The longest wait is the
lock time a rater would meet; the import's own duration is printed beside it. A second probe
takes the lock as a rater's request does, with the app's timeout (DATABASE_SQLITE_TIMEOUT,
30 s): each time it gives up, a rater would have had the 503 "try again" page.

With --postgres, the import runs on that server in a database of its own (the URL's name plus
"_lock", dropped and made anew). PostgreSQL locks rows, not the database, so raters never wait
for an import's INSERTs there; the probe reads pg_stat_activity every 10 ms instead and reports
how long the import's transaction stayed open.

With --votes, the data set's folder (found by biasstudy.datasets, or --dataset) is imported with
`manage.py import_votes --create` instead, into a new study; the probes are the same.

Both modes also print what the import logs of its transaction (`annotations.study_files`,
`vote_imports.vote_import`): how long it took and how much CPU it used (the lock phase's own work,
whatever the machine's load), and the load average before and after. Code that logs no such
line (before the vote import prepared its rows outside the transaction) leaves them null: the
probe's longest wait is the lock time then.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from biasstudy.datasets import dataset_path  # noqa: E402

# The vote data sets --votes imports: their folder among the data sets (biasstudy.datasets).
VOTE_SETS = {"llmbar": "llmbar", "prd": "prd_vicuna80_lfqa", "mtbench": "mtbench_human_judgments"}

PARAGRAPH = (
    "The **answer** explains the effect in plain words, with a list:\n\n- one point about *scattering*\n"
    "- another about [wavelengths](https://example.org/w) and `code`\n\n"
)


# The line annotations.study_files (and vote_imports.vote_import, for votes) logs after the import's transaction.
TRANSACTION_LOG = re.compile(
    r"(?P<rows>\d+) rows written in one transaction in (?P<seconds>[\d.]+) s \((?P<cpu>[\d.]+) s CPU\)"
)


def document(megabytes: float) -> dict:
    questions = []
    size, n = 0, 0
    while size < megabytes * 1_000_000:
        n += 1
        body = PARAGRAPH * 12 + f"Answer number {n}.\n"
        answers = [
            {"id": f"q{n}-a1", "text": "First. " + body},
            {"id": f"q{n}-a2", "text": "Second. " + body},
            {"id": f"q{n}-a1-fe", "derived_from": f"q{n}-a1", "kind": "factual_error", "text": "Wrong. " + body},
            {"id": f"q{n}-a2-ref", "derived_from": f"q{n}-a2", "kind": "reference", "text": body + " [1]"},
        ]
        questions.append(
            {"id": f"q{n}", "bloom": "remembering", "text": f"Question {n}? " + PARAGRAPH, "answers": answers}
        )
        size += sum(len(a["text"]) for a in answers) + 400
    return {"format": "biasstudy", "version": 1, "study": {"slug": "big", "title": "Big"}, "questions": questions}


def probe(db: Path, stop: threading.Event, waits: list[float]) -> None:
    conn = sqlite3.connect(db, timeout=600, isolation_level=None)
    while not stop.is_set():
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("COMMIT")
        waits.append(time.perf_counter() - started)
        time.sleep(0.01)
    conn.close()


def rater(db: Path, timeout: float, stop: threading.Event, refused: list[float]) -> None:
    conn = sqlite3.connect(db, timeout=timeout, isolation_level=None)
    while not stop.is_set():
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("COMMIT")
        except sqlite3.OperationalError:  # "database is locked": the app answers 503
            refused.append(time.perf_counter())
        time.sleep(0.1)
    conn.close()


def transaction_watch(url: str, stop: threading.Event, ages: list[float]) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute(
                "SELECT max(extract(epoch FROM now() - xact_start)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            ages.append(float(row[0] or 0))
            time.sleep(0.01)


def fresh_postgres(url: str) -> str:
    """The URL of a new, empty database beside the one named in `url`."""
    import psycopg
    from psycopg import sql

    base, name = url.rsplit("/", 1)
    name = f"{name}_lock"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{base}/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=60)
    parser.add_argument("--postgres", help="a PostgreSQL URL (see above); default: a fresh SQLite file")
    parser.add_argument("--votes", choices=sorted(VOTE_SETS), help="import this vote data set instead")
    parser.add_argument("--dataset", type=Path, help="the --votes data set's folder (default: the shared copy)")
    args = parser.parse_args()
    from bench.django_env import bench_env

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "import.sqlite3"
        if args.votes:
            path = args.dataset or dataset_path(VOTE_SETS[args.votes])
            command = ["import_votes", str(path), "--format", args.votes, "--study", args.votes, "--create"]
        else:
            path, doc = Path(tmp) / "big.json", document(args.mb)
            path.write_text(json.dumps(doc), encoding="utf-8")
            command = ["import_study", str(path), "--format", "biasstudy"]
        url = fresh_postgres(args.postgres) if args.postgres else f"sqlite:///{db}"
        env = bench_env(url, settings="biasstudy.settings")
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
        timeout = float(env.get("DATABASE_SQLITE_TIMEOUT", 30))
        stop, waits, refused, ages = threading.Event(), [], [], []
        if args.postgres:
            threads = [threading.Thread(target=transaction_watch, args=(url, stop, ages))]
        else:
            threads = [
                threading.Thread(target=probe, args=(db, stop, waits)),
                threading.Thread(target=rater, args=(db, timeout, stop, refused)),
            ]
        for thread in threads:
            thread.start()
        load_before = os.getloadavg()
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            env=env | {"DJANGO_LOG_LEVEL": "INFO"}, cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        elapsed = time.perf_counter() - started
        stop.set()
        for thread in threads:
            thread.join()
        assert done.returncode == 0, done.stderr[-2000:]
        transaction = TRANSACTION_LOG.search(done.stderr)
        result = {"database": "postgresql" if args.postgres else "sqlite"}
        if args.votes:
            result |= {"votes": args.votes, "imported": done.stdout.strip().splitlines()[-1]}
        else:
            result |= {
                "file_mb": round(path.stat().st_size / 1e6, 1),
                "questions": len(doc["questions"]),
                "answers": 4 * len(doc["questions"]),
            }
        result |= {
            "import_seconds": round(elapsed, 1),
            "transaction_rows": int(transaction["rows"]) if transaction else None,
            "transaction_seconds": float(transaction["seconds"]) if transaction else None,
            "transaction_cpu_seconds": float(transaction["cpu"]) if transaction else None,
            "load_before": [round(x, 1) for x in load_before],
            "load_after": [round(x, 1) for x in os.getloadavg()],
        }
        if args.postgres:
            result["longest_transaction_seconds"] = round(max(ages), 2)
        else:
            result |= {
                "longest_lock_wait_seconds": round(max(waits), 2),
                "probes": len(waits),
                "rater_timeout_seconds": timeout,
                "rater_503s": len(refused),
            }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
