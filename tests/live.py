"""Live processes for tests that need more than the test client: a fresh database the server
processes can share (a SQLite file, or a new PostgreSQL database when DATABASE_URL points to
PostgreSQL), gunicorn serving the app on a free loopback port, and Django code run in a
subprocess against that database (seeding, checking, management commands).

The test runner's own database cannot be shared with other processes, so everything a live
test writes or reads goes through `run_django` or the server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def live_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a subprocess on `database_url`, with the test settings."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url,
        "PYTHONPATH": str(ROOT),
        "DJANGO_LOG_LEVEL": "WARNING",
        **extra,
    }


def run_django(code: str, env: dict[str, str], *, timeout: float = 120) -> str:
    """Run `code` after django.setup() in a subprocess; its stdout. Fails the test on an error."""
    script = f"import django; django.setup(); {code}"
    done = subprocess.run(
        [PYTHON, "-c", script], check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def manage(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """`manage.py <args>` in a subprocess; the completed process (the caller checks it)."""
    return subprocess.run(
        [PYTHON, "manage.py", *args], check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def prepare(env: dict[str, str], seed: str | None = None) -> None:
    """Migrate the fresh database and call `seed` ("package.module:function") there."""
    code = "from django.core.management import call_command; call_command('migrate', verbosity=0)"
    if seed:
        module, function = seed.split(":")
        code += f"; from {module} import {function}; {function}()"
    run_django(code, env)


def db_worker(env: dict[str, str], *extra: str) -> subprocess.Popen:
    """The database queue's task worker (`manage.py db_worker`), polling every 0.2 s; stop() it."""
    return subprocess.Popen(
        [PYTHON, "manage.py", "db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.2", *extra],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def stop(process: subprocess.Popen, *, timeout: float = 10) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def gunicorn(env: dict[str, str], *, workers: int = 2, threads: int = 10) -> Iterator[str]:
    """gunicorn serving the app on a free loopback port; yields its base URL once it answers."""
    import httpx

    port = free_port()
    server = subprocess.Popen(
        [PYTHON, "-m", "gunicorn", "biasstudy.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
         "--threads", str(threads), "--timeout", "60", "--log-level", "warning"],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a loaded CI machine can take this long to boot the workers
        while True:
            try:
                if httpx.get(url + "/health/", timeout=2).status_code in (200, 503):
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the live server did not come up"
            time.sleep(0.2)
        yield url
    finally:
        stop(server)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


@pytest.fixture(params=["sqlite", "postgres"])
def live_database(request, tmp_path) -> Iterator[str]:
    """A fresh, empty database URL for server and worker processes: a SQLite file, or (when
    DATABASE_URL points to PostgreSQL) a new database on that server, dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'live.sqlite3'}"
        return
    base = os.environ.get("DATABASE_URL", "")
    if not is_postgres(base):
        pytest.skip("DATABASE_URL does not point to PostgreSQL")
    import psycopg

    name = f"biasstudy_live_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(base)
    yield urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class RedisServer:
    """Debian's redis-server on a free loopback port, without persistence (as a Redis restarted
    without its data would be): stop() it for an outage and start() it again on the same port."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        import redis

        path = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not os.path.exists(path):
            if os.environ.get("CI"):
                pytest.fail("redis-server is missing: scripts/test.sh installs Debian's redis-server")
            pytest.skip("redis-server is not installed")
        self.process = subprocess.Popen(
            [path, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return self
            except redis.ConnectionError:
                assert self.process.poll() is None, self.process.stderr.read()[-2000:]
                assert time.monotonic() < deadline, "redis-server did not come up"
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def kill(self) -> None:
        """SIGKILL: gone at once, connections dropped, nothing saved (as a crash would)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


class PostgresCluster:
    """A throwaway PostgreSQL cluster of the test's own on a free loopback port (trust auth, no
    durability), which a test may stop() for an outage and start() again: the shared server
    must not be stopped. Run as root, the server runs as the postgres user."""

    def __init__(self):
        import tempfile

        version = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
        if not version:
            pytest.skip("PostgreSQL's binaries are not installed")
        self.bin = version[-1]
        self.folder = Path(tempfile.mkdtemp(prefix="biasstudy-pg-"))
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/biasstudy"
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", str(self.folder / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            [*self._as, str(self.bin / program), *args], check=False, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def start(self) -> PostgresCluster:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.folder / "data"), "-o", options, "-w", "-l", str(self.folder / "log"), "start"
        )
        return self

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")

    def create_database(self) -> str:
        import psycopg

        with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE biasstudy")
        return self.url

    def remove(self) -> None:
        subprocess.run(
            [*self._as, str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "stop"],
            check=False, capture_output=True, timeout=60,
        )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)
