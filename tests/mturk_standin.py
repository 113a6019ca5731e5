"""A loopback stand-in for MTurk, for the browser tests of the ExternalQuestion hand-back.

It serves MTurk's two parts on 127.0.0.1: the HIT page that frames the task as MTurk frames an
ExternalQuestion (GET /hit?src=<the task's address>) and the endpoint the done page posts the
assignment to (POST /mturk/externalSubmit), which answers with a page, as MTurk does, and keeps
what was posted.

    with mturk_stand_in() as mturk:
        ...  # mturk.origin is its address, mturk.received the (path, form fields) posted to it
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

SUBMITTED = "Assignment submitted."


@dataclass
class MTurkStandIn:
    origin: str
    received: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        src = parse_qs(self.path.partition("?")[2]).get("src")
        if not self.path.startswith("/hit?") or not src:
            self.send_error(404)
            return
        self._answer(
            f'<!doctype html><title>HIT</title><iframe name="task" src="{src[0]}" width="900" height="700"></iframe>'
        )

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        self.server.stand_in.received.append((self.path, parse_qs(body)))
        self._answer(f"<!doctype html><title>MTurk stand-in</title><p>{SUBMITTED}</p>")

    def _answer(self, html: str) -> None:
        page = html.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args):
        pass


@contextmanager
def mturk_stand_in() -> Iterator[MTurkStandIn]:
    """The stand-in, serving on a free loopback port until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.stand_in = MTurkStandIn(origin=f"http://127.0.0.1:{server.server_port}")  # what the handler reads
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.stand_in
    finally:
        server.shutdown()
        server.server_close()
