"""A small scriptable chat server for tests and benchmarks (loopback only).

It answers POST .../chat/completions (OpenAI-compatible) and POST .../v1/messages (Anthropic's
Messages API: `anthropic_url` is the base URL to give that SDK), with the same behaviour. By default it votes for the shown answer that contains
the word GOOD (a tie when neither or both do), under the labels it reads from the prompt's
"[Label]" headers. Directives in the prompt change what it does, per exact prompt:

    [[do:429x2]]        the first 2 requests get 429 with Retry-After (then the normal vote)
    [[do:500]]          every request gets HTTP 500
    [[do:malformedx1]]  200 with a body that is not JSON
    [[do:dropx1]]       the connection is closed without a response
    [[do:slowx1]]       waits `slow_seconds` before answering
    [[do:garbage]]      answers text that names no option
    [[do:garbagex1]]    ... only the first time
    [[do:cutbody]]      headers promise a body, half of it comes, the connection closes

Bad replies that parse as JSON (a vote with something wrong in it):

    [[do:nanlogprob]] [[do:inflogprob]] [[do:hugelogprob]]   log-probability NaN, Infinity, 1000
    [[do:strlogprob]]                                        log-probability "very likely"
    [[do:negtokens]] [[do:hugetokens]] [[do:strtokens]]      usage of -5, 10**30 or "lots" tokens
    [[do:suptokens]] [[do:digittokens]] [[do:longtokens]]    usage of "²", a 5,000-digit string
                                                             or a 5,000-digit number of tokens
    [[do:listlogprobs]] [[do:textlogprobs]]  `logprobs` sent as a list of tokens, or as a string
    [[do:nultoken]] [[do:surrogatetoken]]    a top log-probability's token carries a NUL, or a
                                             lone surrogate ("\ud800" in the JSON)
    [[do:nul]]          the vote's text carries a NUL character
    [[do:surrogate]]    the vote's text carries a lone surrogate
    [[do:megabyte]]     1 MB of text after the vote
    [[do:nulerror]]     HTTP 400 whose plain-text body carries a NUL character

With logprobs requested, the answer comes with top log-probabilities: the vote's label is
split into the common prefix of the labels and the rest, and `p_choice` of the mass goes to
the chosen option, the remainder to the other named option (see answer_logprobs).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BAD_LOGPROBS = {"nanlogprob": math.nan, "inflogprob": math.inf, "hugelogprob": 1000.0, "strlogprob": "very likely"}
BAD_TOKENS = {
    "negtokens": -5,
    "hugetokens": 10**30,
    "strtokens": "lots",
    "suptokens": "\u00b2",
    "digittokens": "7" * 5000,
    "longtokens": 7,  # written as 5,000 digits by _send (json.dumps refuses so long an int)
}
# Characters put into a top log-probability's token ("Answer" + this).
BAD_TOKEN_TEXT = {"nultoken": "\x00", "surrogatetoken": "\ud800"}
DIRECTIVE = re.compile(r"\[\[do:([a-z0-9]+?)(?:x(\d+))?\]\]")
LABEL = re.compile(r"^\[(?!end of )([^\]\n]+)\]$", re.M)


class JudgeServer:
    def __init__(
        self,
        *,
        delay: float = 0.0,
        retry_after: str = "1",
        slow_seconds: float = 1.0,
        p_choice: float = 0.8,
        fail_every: int = 0,
        fail_status: int = 500,
        echo_auth: bool = False,
    ):
        self.delay = delay
        # Every fail_every-th request (counted over all prompts) gets fail_status; 0: none. The
        # error message repeats the Authorization header when echo_auth is set, as some
        # providers' "invalid key" messages do.
        self.fail_every = fail_every
        self.fail_status = fail_status
        self.echo_auth = echo_auth
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.p_choice = p_choice
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()  # requests per exact prompt
        self.log: list[dict[str, Any]] = []  # one entry per request: time, directive, body
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle's algorithm on, the body waits
            # for the client's delayed ACK of the headers (~40 ms on Linux loopback), which a
            # real model server does not add.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                anthropic = self.path.rstrip("/").endswith("/messages")
                # Anthropic's SDK sends the key as x-api-key; both count as "authorization" here.
                authorization = self.headers.get("x-api-key" if anthropic else "Authorization", "")
                server.handle(self, body, authorization=authorization, anthropic=anthropic)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # A client that timed out leaves a broken pipe behind: expected here, not worth a traceback.
        self.httpd.handle_error = lambda request, client_address: None
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> JudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def requests_for(self, marker: str) -> list[dict[str, Any]]:
        return [entry for entry in self.log if marker in entry["prompt"]]

    # --- behaviour -------------------------------------------------------------------------

    def handle(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], *, authorization: str = "", anthropic: bool = False
    ) -> None:
        messages = body.get("messages", [])
        if anthropic and body.get("system"):
            messages = [{"role": "system", "content": body["system"]}, *messages]
            body = {**body, "messages": messages}
        prompt = "\n".join(m.get("content", "") for m in messages)
        key = hashlib.sha256(prompt.encode()).hexdigest()
        with self.lock:
            self.counts[key] += 1
            nth = self.counts[key]
            self.log.append(
                {"at": time.monotonic(), "prompt": prompt, "body": body, "nth": nth, "authorization": authorization}
            )
            fail = bool(self.fail_every) and len(self.log) % self.fail_every == 0
        if fail:
            message = f"refused (Authorization: {authorization})" if self.echo_auth else "refused"
            return self._send(handler, self.fail_status, {"error": {"message": message}})
        directive = DIRECTIVE.search(prompt)
        action = ""
        if directive:
            times = int(directive.group(2)) if directive.group(2) else None
            if times is None or nth <= times:
                action = directive.group(1)
        if self.delay:
            time.sleep(self.delay)
        if self._transport_failure(handler, action):
            return None
        if action == "slow":
            time.sleep(self.slow_seconds)
        labels = LABEL.findall(prompt)[:2]
        user = body["messages"][-1]["content"]
        if action == "garbage" or len(labels) < 2:
            text = "Both answers have their merits and I would rather not say."
            return self._reply(handler, body, text, None)
        first_text = user.split(f"[{labels[0]}]", 1)[1].split(f"[end of {labels[0]}]", 1)[0]
        second_text = user.split(f"[{labels[1]}]", 1)[1].split(f"[end of {labels[1]}]", 1)[0]
        good_first, good_second = "GOOD" in first_text, "GOOD" in second_text
        if good_first == good_second:
            choice, other = "Tie", labels[0]
        elif good_first:
            choice, other = labels[0], labels[1]
        else:
            choice, other = labels[1], labels[0]
        logprobs = self.answer_logprobs(choice, other) if body.get("logprobs") else None
        choice, logprobs, usage = _spoiled(action, choice, logprobs)
        return self._reply(handler, body, choice, logprobs, usage, long_count=action == "longtokens")

    def _transport_failure(self, handler: BaseHTTPRequestHandler, action: str) -> bool:
        """Answer with the failure the directive names (a status, a malformed or cut-off body,
        a dropped connection), if it names one: True when it did."""
        if action == "429":
            self._send(handler, 429, {"error": {"message": "slow down"}}, {"Retry-After": self.retry_after})
        elif action == "500":
            self._send(handler, 500, {"error": {"message": "boom"}})
        elif action == "nulerror":
            self._send_raw(handler, 400, b"bad request\x00 here", "text/plain")
        elif action == "malformed":
            self._send_raw(handler, 200, b'{"id": "x", "choices": [', "application/json")
        elif action == "drop":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif action == "cutbody":
            data = b'{"id": "x", "choices": [{"message": {"content": "Answer1"}}]}'
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(2 * len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        else:
            return False
        return True

    def answer_logprobs(self, choice: str, other: str) -> list[dict[str, Any]]:
        """Tokens of `choice` with top alternatives: p_choice on the chosen option, the rest on
        `other`, split at the common prefix of the two labels (e.g. "Answer" + "1")."""
        common = 0
        while common < min(len(choice), len(other)) - 1 and choice[common] == other[common]:
            common += 1
        p, q = math.log(self.p_choice), math.log(1 - self.p_choice)
        if common == 0:
            return [_token(choice, p, [(choice, p), (other, q)])]
        return [
            _token(choice[:common], 0.0, [(choice[:common], 0.0)]),
            _token(choice[common:], p, [(choice[common:], p), (other[common:], q)]),
        ]

    def _reply(
        self,
        handler,
        body: dict[str, Any],
        text: str,
        logprobs: list[dict[str, Any]] | dict[str, Any] | None,
        usage=None,
        *,
        long_count: bool = False,
    ) -> None:
        if handler.path.rstrip("/").endswith("/messages"):
            usage = usage or {"prompt_tokens": 100, "completion_tokens": 2}
            return self._send(
                handler,
                200,
                {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "test"),
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]},
                },
            )
        payload = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": _logprobs_field(logprobs),
                }
            ],
            "usage": usage or {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102},
        }
        if not long_count:
            return self._send(handler, 200, payload)
        data = json.dumps(payload).replace('"prompt_tokens": 7', '"prompt_tokens": ' + "7" * 5000, 1)
        return self._send_raw(handler, 200, data.encode(), "application/json")

    def _send(self, handler, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send_raw(handler, status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(self, handler, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None):
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)


def _logprobs_field(logprobs: list[dict[str, Any]] | dict[str, Any] | None) -> Any:
    """The choice's `logprobs` as the API has it ({"content": tokens}), or as a bad reply sends
    it ({"as_is": anything}: that, in place of the object)."""
    if not logprobs:
        return None
    if isinstance(logprobs, dict):
        return logprobs["as_is"]
    return {"content": logprobs}


def _spoiled(action: str, choice: str, logprobs):
    """The reply's text, log-probabilities and token counts as the directive spoils them (bad
    log-probabilities, absurd token counts, NUL bytes, lone surrogates, 1 MB of text), or as
    they are."""
    usage = None
    if action in BAD_LOGPROBS and logprobs:
        logprobs[-1]["logprob"] = BAD_LOGPROBS[action]
    elif action in BAD_TOKEN_TEXT and logprobs:
        logprobs[-1]["top_logprobs"].append({"token": "Answer" + BAD_TOKEN_TEXT[action], "logprob": -9.0})
    elif action == "listlogprobs" and logprobs:
        logprobs = {"as_is": logprobs}  # the token list itself, not {"content": [...]}
    elif action == "textlogprobs" and logprobs:
        logprobs = {"as_is": "very likely"}
    elif action in BAD_TOKENS:
        usage = {"prompt_tokens": BAD_TOKENS[action], "completion_tokens": 2}
    elif action == "nul":
        choice += "\x00"
    elif action == "surrogate":
        choice += "\ud800"
    elif action == "megabyte":
        choice += "\n" + "x" * 1_000_000
    return choice, logprobs, usage


def _token(token: str, logprob: float, top: list[tuple[str, float]]) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top],
    }
