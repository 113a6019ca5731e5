"""Capacity at human pace: an open-loop load of many raters, each voting once every --interval
seconds, against gunicorn with the repository's gunicorn.conf.py, on SQLite and PostgreSQL.

    python bench/bench_rater_capacity.py                                  # 2,000 raters, 30 s, 3 minutes
    python bench/bench_rater_capacity.py --seconds 20 --raters 200        # a smoke run
    BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:55436/postgres \\
        python bench/bench_rater_capacity.py --databases postgres --json out.json

bench_rater_flow.py measures a closed loop: each rater sends its next request when the last is
answered, so a slow server is offered less work and its queue never shows. Here arrivals are
fixed in advance, whatever the server answers. Each rater has its own phase, drawn uniformly
in [0, interval) (seeded), and one cycle every interval from it: a GET of the task page, then,
as soon as the page is there, the POST of its vote form (answered 302 back to the task page).
Each cycle is its own asyncio task, so a slow answer never delays the next arrival. A page's
latency runs from its cycle's scheduled time, so time spent queueing (in the connection pool,
the listen backlog, the workers, or this client's event loop being late) is counted: no
coordinated omission. A vote's runs from the moment it was due, its page's answer. The client
lag (the event loop's delay in sending a page) is reported apart, so a reader sees whether the
client was the limit.

Set-up, not timed: for each database (bench_rater_flow's Database, seed, gunicorn start and
stop) the study is seeded, gunicorn started, two raters warm up for 2 s in bench_rater_flow's
closed loop, and every rater enters through the landing page (GET, then POST of the form, then
the task page it redirects to, where their first item is handed out, as a browser follows it),
the entries spread over --ramp seconds. Then the measured window of --seconds starts.

The clients share one bounded connection pool (--pool connections, httpx's transport), each
rater its own cookie jar (its own httpx.AsyncClient on that transport). At most --pool requests
are in flight; the others wait on a semaphore, not in httpcore's pool, whose queue costs
(queued requests x connections) on every request started or ended: with thousands queued
(a first version of this script, 2026-11-28) the client spent its CPU there and the server idled. Afterwards the votes
in the database are counted (bench_rater_flow.check) against the acknowledged votes, those
answered 302 to the task page without a "not stored" notice (stale, not_yours), and
duplicates per rater and item are looked for. The server's CPU (gunicorn master and workers,
from /proc) over the window is divided by the acknowledged votes: CPU per cycle, page and vote.

Last, unless --closed-seconds 0, bench_rater_flow's closed loop runs once at 8 raters for
"ours" and "bare" on the same server, for the form flow / bare ratio of its section.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_rater_flow import (  # noqa: E402 - after the path is set
    _TOKEN,
    SLUG,
    Database,
    _cpu_seconds,
    _django,
    _outcome,
    _percentile,
    _start_server,
    _stop_server,
    entry_form,
    run_level,
    vote_form,
)
from bench.django_env import bench_env  # noqa: E402

LANDING = f"/s/{SLUG}/"
TASK = f"/s/{SLUG}/task/"
NOT_STORED = ("stale", "not_yours")  # notices of a vote the server did not store


@dataclass
class Window:
    """What the measured window saw: (seconds after its start the request was due, latency ms)."""

    page: list[tuple[float, float]] = field(default_factory=list)
    vote: list[tuple[float, float]] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)
    acked: int = 0
    unknown: int = 0  # votes sent whose answer never came (transport error): stored or not
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


class RaterClient:
    def __init__(self, name: str, client, gate: asyncio.Semaphore) -> None:
        self.name, self.client, self.gate = name, client, gate

    async def send(self, method: str, path: str, **kwargs):
        async with self.gate:
            return await self.client.request(method, path, **kwargs)

    async def enter(self) -> str | None:
        """Landing page, then its form; None once in, else why not. A connection that a
        retiring gunicorn worker closed is tried again, as a browser's reload would."""
        import httpx

        why = None
        for _ in range(3):
            try:
                landing = await self.send("GET", LANDING)
                entered = await self.send("POST", LANDING, data=entry_form(landing.text, self.name))
                if entered.status_code != 302:
                    return f"enter {_outcome(entered)}"
                # The task page the form redirects to, as a browser follows it: the rater's
                # first item is handed out here, and each cycle's vote hands out the next.
                first = await self.send("GET", TASK)
            except httpx.TransportError as exc:
                why = f"enter {type(exc).__name__}"
                continue
            return None if first.status_code == 200 else f"enter: task page {_outcome(first)}"
        return why

    async def cycle(self, due: float, t0: float, w: Window) -> None:
        """One page and its vote; `due` is when the page was to be asked for (loop time)."""
        import httpx

        loop = asyncio.get_running_loop()
        w.lag_ms.append((loop.time() - due) * 1000)
        try:
            page = await self.send("GET", TASK)
        except httpx.HTTPError as exc:
            w.error(f"page {type(exc).__name__}")
            return
        paged = loop.time()
        w.page.append((due - t0, (paged - due) * 1000))
        match = _TOKEN.search(page.text) if page.status_code == 200 else None
        if match is None:
            w.error(f"page {_outcome(page)}")
            return
        headers = {"X-CSRFToken": self.client.cookies["csrftoken"]}
        try:
            response = await self.send("POST", TASK, data=vote_form(match.group(1)), headers=headers)
        except httpx.HTTPError as exc:
            w.error(f"vote {type(exc).__name__}")
            w.unknown += 1
            return
        w.vote.append((paged - t0, (loop.time() - paged) * 1000))
        where = urlsplit(response.headers.get("location", ""))
        notice = parse_qs(where.query).get("notice", [""])[0]
        if response.status_code == 302 and where.path == TASK and notice not in NOT_STORED:
            w.acked += 1
        elif response.status_code == 302 and where.path == TASK:
            w.error(f"vote not stored: notice={notice}")
        else:
            w.error(f"vote {_outcome(response)}")


async def open_loop(url: str, args: argparse.Namespace, server_pid: int) -> dict:
    import httpx

    limits = httpx.Limits(max_connections=args.pool, max_keepalive_connections=args.pool, keepalive_expiry=2.0)
    # keepalive_expiry under gunicorn's keepalive (5 s): a connection the server is about to close
    # is not reused. The gate keeps the pool from queueing (see above).
    transport = httpx.AsyncHTTPTransport(limits=limits)
    gate = asyncio.Semaphore(args.pool)
    timeout = httpx.Timeout(30.0)
    raters = [
        RaterClient(
            f"cap-{n}",
            httpx.AsyncClient(base_url=url, transport=transport, timeout=timeout, follow_redirects=False),
            gate,
        )
        for n in range(args.raters)
    ]
    loop = asyncio.get_running_loop()
    try:
        # Set-up: entries spread evenly over --ramp seconds.
        t_enter = loop.time()

        async def enter_at(n: int, r: RaterClient) -> str | None:
            await asyncio.sleep(max(0.0, t_enter + n * args.ramp / args.raters - loop.time()))
            return await r.enter()

        failed = await asyncio.gather(*(enter_at(n, r) for n, r in enumerate(raters)))
        entry_errors: dict[str, int] = {}
        for why in failed:
            if why:
                entry_errors[why] = entry_errors.get(why, 0) + 1
        inside = [r for r, why in zip(raters, failed, strict=True) if why is None]
        entered_s = loop.time() - t_enter
        print(f"  {len(inside):,} of {args.raters:,} raters entered in {entered_s:.1f} s", flush=True)

        # The schedule, fixed before the window opens: each rater's phase, then one cycle per interval.
        rng = random.Random(args.seed)
        t0 = loop.time() + 1.0
        schedule = sorted(
            (t0 + phase + k * args.interval, n)
            for n, phase in enumerate(rng.uniform(0, args.interval) for _ in inside)
            for k in range(math.ceil((args.seconds - phase) / args.interval))
        )
        w = Window()
        loads: list[float] = []

        async def sample_load() -> None:
            while True:
                loads.append(os.getloadavg()[0])
                await asyncio.sleep(5)

        sampler = asyncio.create_task(sample_load())
        await asyncio.sleep(t0 - loop.time())
        cpu0, srv0 = time.process_time(), _cpu_seconds(server_pid)
        cycles = []
        for due, n in schedule:
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            cycles.append(asyncio.create_task(inside[n].cycle(due, t0, w)))
        await asyncio.gather(*cycles)
        drained = loop.time() - t0
        client_cpu, server_cpu = time.process_time() - cpu0, _cpu_seconds(server_pid) - srv0
        sampler.cancel()
        loads.append(os.getloadavg()[0])
    finally:
        await transport.aclose()
    return _figures(args, w, len(schedule), drained, client_cpu, server_cpu, loads, entry_errors, entered_s)


def _pcts(samples: list[tuple[float, float]]) -> dict:
    values = [ms for _, ms in samples]
    return {f"p{q}": _percentile(values, q) for q in (50, 95, 99)} | {"max": max(values, default=float("nan"))}


def _figures(args, w: Window, cycles, drained, client_cpu, server_cpu, loads, entry_errors, entered_s) -> dict:
    step = max(args.interval, args.seconds / 6)
    buckets = []
    starts = [b * step for b in range(math.ceil(args.seconds / step))]
    for start, end in zip(starts, [*starts[1:], math.inf], strict=True):  # the last: votes due after the window too
        page = [s for s in w.page if start <= s[0] < end]
        vote = [s for s in w.vote if start <= s[0] < end]
        buckets.append({"from_s": start, "pages": len(page), "page_ms": _pcts(page), "votes": len(vote),
                        "vote_ms": _pcts(vote)})  # fmt: skip
    return {
        "raters": args.raters,
        "interval_s": args.interval,
        "seconds": args.seconds,
        "offered_votes_per_s": args.raters / args.interval,
        "cycles_scheduled": cycles,
        "acknowledged_votes": w.acked,
        "achieved_votes_per_s": w.acked / args.seconds,
        "last_answer_after_s": drained,
        "page_ms": _pcts(w.page),
        "vote_ms": _pcts(w.vote),
        "client_lag_ms": {f"p{q}": _percentile(w.lag_ms, q) for q in (50, 99)} | {"max": max(w.lag_ms, default=0)},
        "errors": w.errors,
        "votes_of_unknown_outcome": w.unknown,
        "entry_errors": entry_errors,
        "entry_seconds": entered_s,
        "client_cpu_pct": 100 * client_cpu / drained,
        "server_cpu_pct": 100 * server_cpu / drained,
        "server_cpu_ms_per_vote": 1000 * server_cpu / w.acked if w.acked else float("nan"),
        "load": {"min": min(loads), "max": max(loads), "samples": loads},
        "buckets": buckets,
    }


def _stored(env: dict) -> dict:
    return json.loads(_django("from bench.bench_rater_flow import check; check()", env))


def bench_database(kind: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(kind, Path(tmp))
        try:
            env = bench_env(db.url, DATABASE_CONN_MAX_AGE=str(args.conn_max_age), DJANGO_SECURE_COOKIES="0")
            t = time.perf_counter()
            _django("from django.core.management import call_command; call_command('migrate', verbosity=0)", env)
            seeded = json.loads(_django(f"from bench.bench_rater_flow import seed; seed({args.questions}, 4)", env))
            print(f"[{kind}] migrated and seeded {seeded['items']:,} items in {time.perf_counter() - t:.1f} s, "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            server, url = _start_server(env)
            try:
                warm = run_level(url, "ours", 2, 2, f"warm-{kind}", server.pid)
                row = asyncio.run(open_loop(url, args, server.pid))
                row.update(database=kind, stored=_stored(env), warm_up_submits=warm["submits"])
                print(_report(row), flush=True)
                closed = []
                if args.closed_seconds:
                    for target in ("ours", "bare"):
                        closed.append(run_level(url, target, 8, args.closed_seconds, f"closed-{kind}", server.pid))
                    row["closed_loop_8"] = closed
                    print(_closed(closed), flush=True)
            finally:
                _stop_server(server)
        finally:
            db.drop()
    return row


def _ms(p: dict) -> str:
    return f"{p['p50']:.0f} / {p['p95']:.0f} / {p['p99']:.0f} (max {p['max']:.0f})"


def _report(row: dict) -> str:
    st = row["stored"]
    expected = row["warm_up_submits"] + row["acknowledged_votes"]
    once = (
        expected <= st["votes"] <= expected + row["votes_of_unknown_outcome"]
        and st["duplicate_votes"] == 0
        and st["voted_leases"] == st["votes"]
    )
    floor = row["page_ms"]["p99"] < 300 and row["vote_ms"]["p99"] < 300
    load = row["load"]
    lines = [
        f"[{row['database']}] {row['raters']:,} raters, a vote every {row['interval_s']:g} s, {row['seconds']:g} s "
        f"(load {load['min']:.2f}–{load['max']:.2f}, {time.strftime('%Y-%m-%d %H:%M %Z')})",
        f"  votes/s offered {row['offered_votes_per_s']:.1f}, achieved {row['achieved_votes_per_s']:.1f} "
        f"({row['acknowledged_votes']:,} acknowledged of {row['cycles_scheduled']:,} cycles; "
        f"last answer {row['last_answer_after_s']:.1f} s after the window opened)",
        f"  page ms p50 / p95 / p99: {_ms(row['page_ms'])}",
        f"  vote ms p50 / p95 / p99: {_ms(row['vote_ms'])}",
        f"  floor (page and vote p99 < 300 ms): {'met' if floor else 'MISSED'}",
        f"  client lag ms p50 / p99 / max: {row['client_lag_ms']['p50']:.1f} / {row['client_lag_ms']['p99']:.1f} / "
        f"{row['client_lag_ms']['max']:.1f}; client CPU {row['client_cpu_pct']:.0f} %, server CPU "
        f"{row['server_cpu_pct']:.0f} % = {row['server_cpu_ms_per_vote']:.1f} ms per vote (page + vote)",
        f"  errors: {sum(row['errors'].values())}"
        + "".join(f"\n    {what} x {n}" for what, n in sorted(row["errors"].items())),
        f"  entering ({row['entry_seconds']:.1f} s, untimed): {sum(row['entry_errors'].values())} failed"
        + "".join(f"\n    {what} x {n}" for what, n in sorted(row["entry_errors"].items())),
        f"  stored: {st['votes']:,} votes for {expected:,} acknowledged ({row['warm_up_submits']} of them the "
        f"warm-up's), {row['votes_of_unknown_outcome']} sent without an answer; {st['duplicate_votes']} duplicate "
        f"(rater, item); {st['voted_leases']:,} voted leases: every acknowledged vote stored once: "
        f"{'yes' if once else 'NO'}",
        "  by due time: from s | pages, p50 / p95 / p99 (max) | votes, the same",
    ]
    for b in row["buckets"]:
        lines.append(
            f"    {b['from_s']:5.0f} | {b['pages']:5} {_ms(b['page_ms'])} | {b['votes']:5} {_ms(b['vote_ms'])}"
        )
    return "\n".join(lines)


def _closed(rows: list[dict]) -> str:
    ours, bare = rows
    return (
        f"  closed loop, 8 raters, {ours['seconds']:.0f} s each (bench_rater_flow.run_level): form flow "
        f"{ours['votes_per_s']:.1f} votes/s, bare {bare['votes_per_s']:.1f}: ratio "
        f"{ours['votes_per_s'] / bare['votes_per_s']:.2f}; server CPU {ours['server_cpu_ms_per_vote']:.1f} / "
        f"{bare['server_cpu_ms_per_vote']:.1f} ms per vote; errors {sum(ours['errors'].values())} / "
        f"{sum(bare['errors'].values())}; load {ours['load'][0]:.2f}, {bare['load'][0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raters", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=30, help="seconds between a rater's votes (default 30)")
    parser.add_argument("--seconds", type=float, default=180, help="the measured window (default 180)")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--pool", type=int, default=32, help="connections and requests in flight (default 32)")
    parser.add_argument("--ramp", type=float, default=60, help="seconds over which raters enter (default 60)")
    parser.add_argument("--questions", type=int, default=4000, help="questions seeded, 2 items of 4 votes each")
    parser.add_argument("--closed-seconds", type=float, default=10, help="closed loop at 8 raters; 0: skip")
    parser.add_argument("--conn-max-age", type=int, default=60, help="DATABASE_CONN_MAX_AGE (docs/DEPLOY.md: 60)")
    parser.add_argument("--seed", type=int, default=1, help="of the raters' phases")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args()
    needed = args.raters * math.ceil(args.seconds / args.interval) + args.closed_seconds * 300
    if needed > args.questions * 2 * 4:
        parser.error(f"--questions {args.questions} seeds too few slots for about {needed:,.0f} votes")
    import django

    print(
        f"python {platform.python_version()}, Django {django.get_version()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        flush=True,
    )
    rows = [bench_database(kind, args) for kind in args.databases.split(",")]
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
