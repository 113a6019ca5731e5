"""Benchmark of the rater flow against gunicorn: simulated raters each loop "load the task
page, submit a vote", next to the same loop on a bare Django view pair (render a page, insert
one row) on the same stack and database.

    python bench/bench_rater_flow.py                          # 60 s per level, both databases
    python bench/bench_rater_flow.py --seconds 20 --repeat 3 --databases sqlite
    python bench/bench_rater_flow.py --json results.json      # also write every figure as JSON
    python bench/bench_rater_flow.py --think 2 --levels 32,64  # raters pause ~2 s between votes

For each database (a fresh SQLite file, and a fresh PostgreSQL database made from
$BENCH_POSTGRES_URL, default postgres://biasstudy:biasstudy@127.0.0.1:5432/biasstudy, dropped
afterwards) it migrates with bench.settings, seeds one study big enough that no rater runs out,
starts gunicorn with the repository's gunicorn.conf.py on a free port of 127.0.0.1 and then, for
each concurrency level and repeat, runs "ours" and "bare" one after the other for --seconds.

Ours (the form flow, what a browser without JavaScript does): each rater enters through the
landing page (not timed), then loops GET /s/<slug>/task/ (the page, which hands out the lease)
and POST of the vote form (token, choice, client_ms) which answers 302 back to the task. Htmx
(what a browser with JavaScript does): one request per vote, the POST with HX-Request, which
answers with the next item's fragment (its token is the next vote's). Bare: GET /bare/page/, POST /bare/insert/ with the CSRF token.
Afterwards the votes in the database are counted against the successful submits, and duplicates
per rater and item are looked for.

By default the raters loop without pause (a closed loop that saturates the server: latency is
then the queue, by Little's law raters / throughput). With --think T each rater pauses a random
0.5T–1.5T seconds after each vote, like a person reading the next pair, so that the latency
figures are those of a server that is not saturated.

The load generator runs in this process (one thread and one httpx client per rater); its CPU
time is reported next to the server's (gunicorn master and workers, from /proc) so that a
reader can see whether the client was the limit. On a 2-core machine they share the cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = sys.executable
SLUG = "bench"
DEFAULT_POSTGRES = "postgres://biasstudy:biasstudy@127.0.0.1:5432/biasstudy"

_TOKEN = re.compile(r'name="token" value="([^"]+)"')
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


# --- run inside a Django process (seeding and checking) --------------------------------------


def _saved(obj):
    """What Model.save() computes before writing (lengths of answers, the stored render)."""
    if hasattr(obj, "refresh_lengths"):
        obj.refresh_lengths()
    obj.refresh_html()
    return obj


def seed(questions: int, votes_per_item: int, *, analyze_empty: bool = False) -> None:
    """One collecting study: `questions` questions, each with its control item and one
    fake-reference item, written with bulk_create (a few seconds for thousands). With
    `analyze_empty`, PostgreSQL also analyses the empty tables (the worst case, see below)."""
    from django.db import DatabaseError, transaction

    from annotations.models import Answer, ComparisonItem, PerturbationKind, Question, Slot, Study

    reference = PerturbationKind.objects.get(slug="reference")
    with transaction.atomic():
        study = Study.objects.create(
            title="Rater flow benchmark",
            slug=SLUG,
            status=Study.Status.COLLECTING,
            votes_per_item=votes_per_item,
            target_per_rater=1_000_000,
            lease_seconds=900,
        )
        # What save() does for each question and answer (lengths, stored render), as the
        # study import does; bulk_create skips save().
        qs = Question.objects.bulk_create(
            _saved(Question(study=study, external_id=f"q{n}", text=f"Benchmark question {n}: why is the sky blue?",
                            bloom_level="remembering"))
            for n in range(questions)
        )  # fmt: skip
        originals = Answer.objects.bulk_create(
            _saved(Answer(question=q, external_id=f"{q.external_id}-{side}", text=text))
            for n, q in enumerate(qs)
            for side, text in (("a1", _answer(n, "a1")), ("a2", _answer(n, "a2")))
        )  # fmt: skip
        variants = Answer.objects.bulk_create(
            _saved(Answer(question=q, external_id=f"{q.external_id}-a2-reference", text=text,
                          derived_from=originals[2 * n + 1], kind=reference))
            for n, q in enumerate(qs)
            for text in [_answer(n, "a2") + f"\n\nReferences\n1. Someone ({1950 + n % 70}). *Skies*, p. {n}."]
        )  # fmt: skip
        ComparisonItem.objects.bulk_create(
            item
            for i, q in enumerate(qs)
            for item in (
                ComparisonItem(study=study, question=q, answer_a1=originals[2 * i], answer_a2=originals[2 * i + 1]),
                ComparisonItem(study=study, question=q, answer_a1=originals[2 * i], answer_a2=variants[i],
                               kind=reference),
            )
        )  # fmt: skip
        Slot.objects.sync(study)  # bulk_create skips the save() that makes each item's slots
    from django.db import connection

    if connection.vendor == "postgresql":
        # As autovacuum would have done long before raters arrive: it analyses the tables the
        # seed filled, and leaves alone those nobody wrote to (leases, votes), which a fresh
        # deployment has never analysed. PostgreSQL assumes a never analysed table may be
        # big; one analysed while empty it plans as empty, and the plans a connection
        # prepares then stay until the next ANALYZE (docs/BENCHMARKS.md's history: section 1.7 of 2026-11-22).
        # It also vacuums them (inserts alone trigger autovacuum since PostgreSQL 13), and
        # the seed's writes are flushed by a checkpoint: otherwise both land in the middle of
        # the first level measured, which is ours (its section 1.9).
        with connection.cursor() as cursor:
            if analyze_empty:
                cursor.execute("ANALYZE")
            for model in (Study, Question, Answer, ComparisonItem, Slot):
                cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
            try:
                cursor.execute("CHECKPOINT")  # superuser or pg_checkpoint only
            except DatabaseError as exc:
                print(f"no CHECKPOINT after the seed: {exc}".strip(), file=sys.stderr)
    else:
        with connection.cursor() as cursor:  # the seed's pages from the WAL into the database file
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print(json.dumps({"items": ComparisonItem.objects.filter(study=study).count()}))


def _answer(n: int, side: str) -> str:
    """A distinct answer of about 110 words with some markdown, like a real one (each question
    has its own texts, so the page renders them rather than finding them all cached)."""
    lead = "Rayleigh scattering" if side == "a1" else "Scattering by air molecules"
    return (
        f"**{lead}** explains it (question {n}). Sunlight contains every colour, and the molecules of "
        "nitrogen and oxygen in the air scatter short wavelengths far more than long ones, roughly "
        "with the inverse fourth power of the wavelength.\n\n"
        "- Blue light is scattered about *five times* more than red light.\n"
        "- Violet is scattered even more, but the Sun emits less of it and our eyes are less "
        "sensitive to it.\n- At sunset the light crosses more air, so the blue is scattered away and "
        f"the sky looks red.\n\nIn short: the sky is blue because scattered blue light reaches us from "
        f"every direction of the sky, while the direct sunlight looks slightly yellow ({side}-{n})."
    )


def check() -> None:
    """Print the stored votes of the study and the bare rows, as JSON."""
    from django.db.models import Count

    from annotations.models import Lease, Vote
    from bench.bare.models import BareRow

    votes = Vote.objects.filter(item__study__slug=SLUG)
    summary = {
        "votes": votes.count(),
        "duplicate_votes": votes.values("rater", "item").annotate(n=Count("pk")).filter(n__gt=1).count(),
        "voted_leases": Lease.objects.filter(study__slug=SLUG, voted_at__isnull=False).count(),
        "bare_rows": BareRow.objects.count(),
    }
    print(json.dumps(summary))


# --- the harness ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _django(code: str, env: dict, timeout: int = 900) -> str:
    done = subprocess.run(
        [PYTHON, "-c", f"import django; django.setup(); {code}"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return done.stdout


def _cpu_seconds(pid: int) -> float:
    """CPU time of a process, its live children and its reaped children (gunicorn recycles
    workers after max_requests), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(p: int) -> list[str]:
        with open(f"/proc/{p}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()

    fields = stat(pid)
    total = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        children = []
    for child in children:
        with contextlib.suppress(OSError):
            total += sum(int(x) for x in stat(child)[11:13])
    return total / tick


@dataclass
class Sample:
    page_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    submits: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _outcome(response) -> str:
    """What a response that was not the expected one was, for the error counts: its status,
    where it sends the browser (a redirect, or htmx's HX-Redirect), else why it holds no next
    token, so that a run explains its errors without --json."""
    where = response.headers.get("location") or response.headers.get("hx-redirect")
    if where:
        return f"{response.status_code} to {urlsplit(where).path}"
    if response.status_code == 200:
        return "200 without a token"
    reason = re.search(r"<title>([^<]*)</title>", response.text)
    return f"{response.status_code} {reason.group(1).strip()[:60] if reason else response.text[:60]!r}"


def entry_form(landing: str, participant: str) -> dict:
    """The landing page's form (its HTML), filled in as a new rater `participant` does."""
    return {"participant_id": participant, "consent": "on", "csrfmiddlewaretoken": _CSRF.search(landing).group(1)}


def vote_form(token: str) -> dict:
    """The vote form on the item of lease `token`: the first answer, after 4 s (not too fast)."""
    return {"token": token, "choice": "first", "client_ms": "4000"}


class Rater(threading.Thread):
    def __init__(
        self, url: str, target: str, name: str, start: threading.Barrier, stop: threading.Event, think: float = 0
    ):
        super().__init__(daemon=True)
        self.think = think
        import httpx

        self.client = httpx.Client(base_url=url, timeout=30, follow_redirects=False)
        self.target, self.name_, self.start_barrier, self.stop = target, name, start, stop
        self.sample = Sample()
        self.ready_error: str | None = None
        self.token: str | None = None  # htmx: the next vote's token, from the last fragment

    def _enter(self) -> None:
        if self.target == "bare":
            return
        self.token = None
        landing = self.client.get(f"/s/{SLUG}/")
        entered = self.client.post(f"/s/{SLUG}/", data=entry_form(landing.text, self.name_))
        if entered.status_code != 302:
            raise RuntimeError(f"entering failed: {entered.status_code} {entered.text[:300]}")

    def _one(self) -> None:
        if self.target == "htmx":
            return self._one_htmx()
        s = self.sample
        page_url, post_url = (f"/s/{SLUG}/task/", f"/s/{SLUG}/task/") if self.target == "ours" else (
            "/bare/page/", "/bare/insert/")  # fmt: skip
        t0 = time.perf_counter()
        page = self.client.get(page_url)
        s.page_ms.append((time.perf_counter() - t0) * 1000)
        if page.status_code != 200:
            s.error(f"page {_outcome(page)}")
            return
        if self.target == "ours":
            match = _TOKEN.search(page.text)
            if match is None:
                s.error(f"page {_outcome(page)}")
                return
            data = vote_form(match.group(1))
            headers = {"X-CSRFToken": self.client.cookies["csrftoken"]}
            expected = 302
        else:
            data = {"csrfmiddlewaretoken": _CSRF.search(page.text).group(1), "value": self.name_[:16]}
            headers = {}
            expected = 200
        t0 = time.perf_counter()
        response = self.client.post(post_url, data=data, headers=headers)
        s.submit_ms.append((time.perf_counter() - t0) * 1000)
        if response.status_code != expected:
            s.error(f"submit {_outcome(response)}")
            return
        s.submits += 1

    def _one_htmx(self) -> None:
        """One vote, one request: the answer is the next item's fragment (the first item comes
        from a page, timed as a page)."""
        s = self.sample
        if self.token is None:
            t0 = time.perf_counter()
            page = self.client.get(f"/s/{SLUG}/task/")
            s.page_ms.append((time.perf_counter() - t0) * 1000)
            match = _TOKEN.search(page.text) if page.status_code == 200 else None
            if match is None:
                s.error(f"page {_outcome(page)}")
                return
            self.token = match.group(1)
        data = vote_form(self.token)
        headers = {"X-CSRFToken": self.client.cookies["csrftoken"], "HX-Request": "true"}
        t0 = time.perf_counter()
        response = self.client.post(f"/s/{SLUG}/task/", data=data, headers=headers)
        s.submit_ms.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            s.error(f"submit {_outcome(response)}")
            self.token = None
            return
        s.submits += 1  # the vote is stored, whatever comes with it
        match = _TOKEN.search(response.text)
        self.token = match.group(1) if match else None
        if match is None:  # the rater got no next item (sent to the done page: out of questions?)
            s.error(f"next item {_outcome(response)}")

    def run(self) -> None:
        import httpx

        # Entering is set-up, not timed: a connection that a retiring gunicorn worker closed
        # (max_requests) is tried again, as a browser's reload would, instead of the rater
        # sitting out the level (a level of one rater then measured nothing).
        for _ in range(3):
            try:
                self._enter()
                self.ready_error = None
                break
            except httpx.TransportError as exc:
                self.ready_error = repr(exc)
            except Exception as exc:  # noqa: BLE001 - reported, the level counts it as an error
                self.ready_error = repr(exc)
                break
        self.start_barrier.wait()
        if self.ready_error:
            return
        if self.think:  # paced raters arrive spread over one pause, not all in the same instant
            self.stop.wait(random.uniform(0, self.think))  # noqa: S311 - not security
        while not self.stop.is_set():
            try:
                self._one()
            except httpx.HTTPError as exc:
                self.sample.error(type(exc).__name__)
            if self.think:
                self.stop.wait(self.think * random.uniform(0.5, 1.5))  # noqa: S311 - not security
        self.client.close()


def run_level(url: str, target: str, raters: int, seconds: float, tag: str, server_pid: int, think: float = 0) -> dict:
    stop = threading.Event()
    start = threading.Barrier(raters + 1)
    # Every target gets raters of its own: with names shared between targets, the htmx flow
    # resumed the raters of the form flow before it, who could run out of questions (one item
    # per question each), their next votes errors.
    threads = [Rater(url, target, f"{tag}-{target}-{n}", start, stop, think) for n in range(raters)]
    for t in threads:
        t.start()
    start.wait()  # every rater has entered: the clock starts
    load_before = os.getloadavg()
    cpu0, srv0, t0 = time.process_time(), _cpu_seconds(server_pid), time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    client_cpu, server_cpu = time.process_time() - cpu0, _cpu_seconds(server_pid) - srv0
    page = [x for t in threads for x in t.sample.page_ms]
    submit = [x for t in threads for x in t.sample.submit_ms]
    errors: dict[str, int] = {}
    for t in threads:
        for k, v in t.sample.errors.items():
            errors[k] = errors.get(k, 0) + v
        if t.ready_error:
            errors[f"enter: {t.ready_error[:80]}"] = errors.get(f"enter: {t.ready_error[:80]}", 0) + 1
    submits = sum(t.sample.submits for t in threads)
    return {
        "target": target,
        "raters": raters,
        "think_s": think,
        "seconds": round(elapsed, 2),
        "submits": submits,
        "votes_per_s": submits / elapsed,
        "page_ms": {f"p{q}": _percentile(page, q) for q in (50, 95, 99)},
        "submit_ms": {f"p{q}": _percentile(submit, q) for q in (50, 95, 99)},
        "errors": errors,
        "client_cpu_pct": 100 * client_cpu / elapsed,
        "server_cpu_pct": 100 * server_cpu / elapsed,
        "server_cpu_ms_per_vote": 1000 * server_cpu / submits if submits else float("nan"),
        "load": [round(x, 2) for x in (*load_before, *os.getloadavg()[:1])],
    }


class Database:
    """A fresh database for one run, removed afterwards."""

    def __init__(self, kind: str, tmp: Path):
        self.kind = kind
        if kind == "sqlite":
            self.url = f"sqlite:///{tmp / 'bench.sqlite3'}"
            return
        import psycopg

        self.base = os.environ.get("BENCH_POSTGRES_URL", DEFAULT_POSTGRES)
        self.name = f"biasstudy_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.url = urlunsplit(urlsplit(self.base)._replace(path=f"/{self.name}"))

    def drop(self) -> None:
        if self.kind == "sqlite":
            return
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class WsgiClient:
    """Requests straight to Django's WSGI handler, in this process, with the cookies it sets:
    what gunicorn's worker does with a request, without the socket. Not Django's test client,
    which leaves six weakref finalizers behind per page + vote (its `template_rendered`
    receiver) that the garbage collector then walks, and which posts forms as multipart: both
    made the in-process figures of earlier sessions grow with the number of requests
    (docs/BENCHMARKS.md's history: section 1.8 of 2026-11-22)."""

    def __init__(self) -> None:
        from django.core.wsgi import get_wsgi_application

        self.app = get_wsgi_application()
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, form: dict | None = None, headers: dict | None = None):
        """(status, body) of one request; `form` is sent url-encoded, as a browser does."""
        import io
        from http.cookies import SimpleCookie
        from urllib.parse import urlencode

        body = urlencode(form).encode() if form is not None else b""
        environ = {
            "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SCRIPT_NAME": "",
            "SERVER_NAME": "testserver", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "testserver", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr, "wsgi.version": (1, 0),
            "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
            "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/x-www-form-urlencoded",
            "HTTP_COOKIE": "; ".join(f"{name}={value}" for name, value in self.cookies.items()),
        }  # fmt: skip
        for name, value in (headers or {}).items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        started: dict = {}

        def start_response(status: str, response_headers: list, exc_info=None) -> None:
            started["status"], started["headers"] = int(status.split()[0]), response_headers

        response = self.app(environ, start_response)
        try:
            content = b"".join(response)
        finally:
            response.close()
        for name, value in started["headers"]:
            if name.lower() == "set-cookie":
                cookie = SimpleCookie()
                cookie.load(value)
                self.cookies.update((key, morsel.value) for key, morsel in cookie.items())
        return started["status"], content.decode()


@contextlib.contextmanager
def rater_in_process(questions: int, *, postgres: bool, votes_per_item: int = 4, analyze_empty: bool = False):
    """For the in-process scripts (profile_rater_views.py, bench_rater_drift.py): a fresh
    database (a SQLite file, or a PostgreSQL database dropped afterwards), Django set up on it
    in this process, seeded by `seed` (which ANALYZEs on PostgreSQL), and one rater "P1"
    entered through the landing page (`WsgiClient`). Yields `cycle()`: one task page and one
    vote on it, returning the seconds each took, in wall time and in this process's CPU time
    (page, vote, page CPU, vote CPU)."""
    tmp = Path(tempfile.mkdtemp())
    database = Database("postgres", tmp) if postgres else None
    try:
        from bench.django_env import setup_django

        setup_django(
            database.url if database else f"sqlite:///{tmp / 'bench.sqlite3'}",
            DJANGO_SECURE_COOKIES="0",
            DJANGO_ALLOWED_HOSTS="testserver",
            DATABASE_CONN_MAX_AGE="60",
        )
        seed(questions, votes_per_item, analyze_empty=analyze_empty)
        client = WsgiClient()
        entered = client.request("POST", f"/s/{SLUG}/", entry_form(client.request("GET", f"/s/{SLUG}/")[1], "P1"))
        assert entered[0] == 302, entered
        task = f"/s/{SLUG}/task/"

        def cycle() -> tuple[float, float, float, float]:
            started, cpu_started = time.perf_counter(), time.process_time()
            status, page = client.request("GET", task)
            paged, cpu_paged = time.perf_counter(), time.process_time()
            assert status == 200, status
            token = _TOKEN.search(page).group(1)
            status, _ = client.request("POST", task, vote_form(token), {"X-CSRFToken": client.cookies["csrftoken"]})
            assert status == 302, status
            voted, cpu_voted = time.perf_counter(), time.process_time()
            return paged - started, voted - paged, cpu_paged - cpu_started, cpu_voted - cpu_paged

        yield cycle
    finally:
        if database:
            from django.db import connections

            connections.close_all()
            database.drop()


def _start_server(env: dict) -> tuple[subprocess.Popen, str]:
    import httpx

    port = _free_port()
    server = subprocess.Popen(
        [PYTHON, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py")],
        env={**env, "GUNICORN_BIND": f"127.0.0.1:{port}"}, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/bare/page/", timeout=2).status_code == 200:
                return server, url
        except httpx.TransportError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError("gunicorn did not come up")
        time.sleep(0.3)


def _stop_server(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


TARGETS = ("ours", "htmx", "bare")


def bench_database(kind: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(kind, Path(tmp))
        try:
            from bench.django_env import bench_env

            env = bench_env(
                db.url,
                DATABASE_CONN_MAX_AGE=str(args.conn_max_age),
                # Plain HTTP on loopback (no TLS proxy here): cookies must travel without TLS.
                DJANGO_SECURE_COOKIES="0",
            )
            t0 = time.perf_counter()
            _django("from django.core.management import call_command; call_command('migrate', verbosity=0)", env)
            seeded = json.loads(
                _django(f"from bench.bench_rater_flow import seed; seed({args.questions}, {args.votes_per_item})", env)
            )
            print(f"[{kind}] migrated and seeded {seeded['items']:,} items in {time.perf_counter() - t0:.1f}s",
                  flush=True)  # fmt: skip
            server, url = _start_server(env)
            results = []
            try:
                # Warm up both paths (imports, template loading, connections) untimed.
                warm = [run_level(url, target, 2, 2, f"warm-{kind}", server.pid) for target in TARGETS]
                for raters in args.levels:
                    for r in range(args.repeat):
                        for target in TARGETS if r % 2 == 0 else TARGETS[::-1]:
                            row = run_level(
                                url, target, raters, args.seconds, f"{kind}-{raters}-{r}", server.pid, args.think
                            )
                            row.update(database=kind, repeat=r)
                            results.append(row)
                            print(_line(row), flush=True)
            finally:
                _stop_server(server)
            stored = json.loads(_django("from bench.bench_rater_flow import check; check()", env))
        finally:
            db.drop()
    return {"database": kind, "rows": results, "warm_up": warm, "stored": stored}


def _line(row: dict) -> str:
    p, s = row["page_ms"], row["submit_ms"]
    return (
        f"  {row['database']:8} {row['target']:4} raters={row['raters']:3} r{row['repeat']} "
        f"{row['votes_per_s']:7.1f} votes/s  page p50/95/99 {p['p50']:6.1f} {p['p95']:6.1f} {p['p99']:6.1f}  "
        f"submit {s['p50']:6.1f} {s['p95']:6.1f} {s['p99']:6.1f} ms  errors={sum(row['errors'].values())} "
        f"client {row['client_cpu_pct']:.0f}% server {row['server_cpu_pct']:.0f}% "
        f"({row['server_cpu_ms_per_vote']:.1f} ms/vote) load {row['load'][0]}"
    ) + "".join(f"\n      error: {what} x {n}" for what, n in sorted(row["errors"].items()))


def summarise(report: list[dict]) -> str:
    """Markdown tables: best and median over repeats, and ours/bare."""
    out = []
    for db in report:
        rows = db["rows"]
        think = rows[0].get("think_s", 0) if rows else 0
        paced = f" (raters pause {0.5 * think:g}–{1.5 * think:g} s after each vote)" if think else ""
        out.append(f"\n### {db['database']}{paced}\n")
        out.append(
            "| raters | target | votes/s best | votes/s median | page p50 / p95 / p99 ms | submit p50 / p95 / p99 ms "
            "| errors | client CPU % | server CPU % | server CPU ms / vote | load (1 min) |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        ratios = []
        for raters in sorted({r["raters"] for r in rows}):
            med = {}
            for target in TARGETS:
                sel = [r for r in rows if r["raters"] == raters and r["target"] == target]
                if not sel:
                    continue
                vps = [r["votes_per_s"] for r in sel]
                med[target] = statistics.median(vps)

                def lat(kind: str, sel: list = sel) -> str:
                    return " / ".join(
                        f"{statistics.median(r[kind][q] for r in sel):.0f}" for q in ("p50", "p95", "p99")
                    )

                out.append(
                    f"| {raters} | {target} | {max(vps):.1f} | {med[target]:.1f} | {lat('page_ms')} | "
                    f"{lat('submit_ms')} | {sum(sum(r['errors'].values()) for r in sel)} | "
                    f"{statistics.median(r['client_cpu_pct'] for r in sel):.0f} | "
                    f"{statistics.median(r['server_cpu_pct'] for r in sel):.0f} | "
                    f"{statistics.median(r.get('server_cpu_ms_per_vote', float('nan')) for r in sel):.1f} | "
                    f"{min(r['load'][0] for r in sel):.2f}–{max(r['load'][0] for r in sel):.2f} |"
                )
            ratios.append(
                (
                    raters,
                    *(
                        med.get(t, float("nan")) / med["bare"] if med.get("bare") else float("nan")
                        for t in ("ours", "htmx")
                    ),
                )
            )
        failed = [(r["raters"], r["target"], what, n) for r in rows for what, n in sorted(r["errors"].items())]
        if failed:
            out.append("\nClient errors (what the server answered instead, or the client's exception):\n")
            out += [f"- {raters} raters, {target}: {what} x {n}" for raters, target, what, n in failed]
        out.append("\n| raters | form flow / bare (median votes/s) | htmx / bare |\n|---|---|---|")
        out += [f"| {raters} | {form:.2f} | {htmx:.2f} |" for raters, form, htmx in ratios]
        everything = rows + db["warm_up"]
        ours = sum(r["submits"] for r in everything if r["target"] in ("ours", "htmx"))
        bare = sum(r["submits"] for r in everything if r["target"] == "bare")
        st = db["stored"]
        out.append(
            f"\nStored afterwards: {st['votes']:,} votes for {ours:,} successful submits (warm-up included), "
            f"{st['duplicate_votes']} duplicate (rater, item) pairs, {st['voted_leases']:,} voted leases; "
            f"{st['bare_rows']:,} bare rows for {bare:,} bare inserts."
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60, help="duration of each level (default 60)")
    parser.add_argument("--levels", default="1,8,32,64", help="concurrent raters, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each level (best and median reported)")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument(
        "--questions", type=int, default=15000, help="questions seeded (2 items each; one rater may vote on each once)"
    )
    parser.add_argument("--votes-per-item", type=int, default=4)
    parser.add_argument("--conn-max-age", type=int, default=60, help="DATABASE_CONN_MAX_AGE (docs/DEPLOY.md: 60)")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument(
        "--think", type=float, default=0, help="mean pause of a rater after each vote, seconds (default 0: no pause)"
    )
    args = parser.parse_args()
    args.levels = [int(x) for x in args.levels.split(",")]
    import django

    print(
        f"python {platform.python_version()}, Django {django.get_version()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        flush=True,
    )
    report = [bench_database(kind, args) for kind in args.databases.split(",")]
    print(summarise(report))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "report": report}, indent=1))


if __name__ == "__main__":
    main()
