"""A loopback stand-in for the part of Prolific's public API v1 that the prolific app uses, as
Prolific's API reference describes it (docs.prolific.com/api-reference): every request carries
`Authorization: Token <token>`; errors answer `{"error": {"detail": ...}}` with a 4xx.

    POST /api/v1/studies/                       create a draft study (status UNPUBLISHED)
    GET  /api/v1/studies/{id}/                  the study
    POST /api/v1/studies/{id}/transition/       {"action": PUBLISH | PAUSE | START | STOP}
    GET  /api/v1/studies/{id}/submissions/      {"results": [{id, participant_id, status, ...}],
                                                 "_links": {"next": {"href": the next page or null}}}
    POST /api/v1/submissions/{id}/transition/   {"action": APPROVE | REJECT, rejection_category,
                                                 message (REJECT: at least 100 characters)}
    POST /api/v1/study-cost-calculator/         {reward, total_available_places} -> {total_cost}
    POST /api/v1/submissions/bonus-payments/    {study_id, csv_bonuses: "<participant>,<amount>\\n"...}
                                                -> a bulk bonus payment (id, amount, fees, total_amount)
    POST /api/v1/bulk-bonus-payments/{id}/pay/  pays it, asynchronously (202); NOT idempotent: each
                                                call pays again, as Prolific's reference warns

Switches, for the tests: `fail_next(status, times, detail)` answers the next requests with that
status (429 with Retry-After: Prolific's wallet contention), `slow_next(times)` waits
`slow_seconds` before answering (a client's timeout). `participant_join` and `submission_set`
play the participants' side.

    with prolific_server(token="t") as prolific:
        ...  # prolific.base_url, prolific.studies, prolific.submissions, prolific.paid, prolific.log
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The enums of Prolific's reference.
STUDY_ACTIONS = {"PUBLISH": "ACTIVE", "PAUSE": "PAUSED", "START": "ACTIVE", "STOP": "AWAITING REVIEW"}
REJECTION_CATEGORIES = {
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
}
DEVICES = {"desktop", "tablet", "mobile"}
CODE_TYPES = {
    "COMPLETED",
    "FAILED_ATTENTION_CHECK",
    "FOLLOW_UP_STUDY",
    "GIVE_BONUS",
    "INCOMPATIBLE_DEVICE",
    "NO_CONSENT",
    "OTHER",
    "FIXED_SCREENOUT",
}
PLACEHOLDERS = ("{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}")
# Submissions per page of a list (Prolific's default page size).
PAGE_SIZE = 20
# Prolific's service fee on top of rewards and bonuses (a third), as its help pages state it.
FEE = Decimal("0.3333")


class BadRequest(Exception):
    def __init__(self, status: int, detail: Any):
        super().__init__(detail)
        self.status, self.detail = status, detail


class ProlificServer:
    def __init__(self, *, token: str, slow_seconds: float = 2.0):
        self.token = token
        self.slow_seconds = slow_seconds
        self.lock = threading.Lock()
        self.studies: dict[str, dict] = {}
        self.submissions: dict[str, dict] = {}
        self.bonuses: dict[str, dict] = {}
        self.paid: list[tuple[str, str, Decimal]] = []  # (bulk bonus id, participant, amount) per payment
        self.log: list[tuple[str, str, dict]] = []  # (method, path, body) of every request
        self._fail: list[tuple[int, Any, str]] = []  # (status, detail, path pattern) per request to fail
        self._slow: list[str] = []  # a path pattern per request to answer slowly
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self, "GET")

            def do_POST(self) -> None:
                server._handle(self, "POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, client_address: None  # a client that timed out
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    # --- switches --------------------------------------------------------------------------

    def fail_next(self, status: int, times: int = 1, detail: Any = "Too many requests", *, path: str = "") -> None:
        """The next `times` requests (to a path matching `path`, a regex) get `status`."""
        with self.lock:
            self._fail += [(status, detail, path)] * times

    def slow_next(self, times: int = 1, *, path: str = "") -> None:
        """The next `times` requests (to a path matching `path`) wait `slow_seconds`, then are
        done as usual: a client that timed out does not know whether they were."""
        with self.lock:
            self._slow += [path] * times

    # --- the participants' side --------------------------------------------------------------

    def participant_join(self, study_id: str, participant_id: str, *, status: str = "ACTIVE") -> str:
        """A participant starts the study: their submission's id (Prolific's SESSION_ID)."""
        submission_id = secrets.token_hex(12)
        with self.lock:
            self.submissions[submission_id] = {
                "id": submission_id,
                "participant_id": participant_id,
                "status": status,
                "study_id": study_id,
                "started_at": "2026-12-07T10:00:00Z",
                "completed_at": None,
                "study_code": None,
            }
        return submission_id

    def submission_set(self, submission_id: str, *, status: str, study_code: str | None = None) -> None:
        with self.lock:
            self.submissions[submission_id]["status"] = status
            if study_code is not None:
                self.submissions[submission_id]["study_code"] = study_code

    def requests_to(self, pattern: str) -> list[tuple[str, str, dict]]:
        return [entry for entry in self.log if re.search(pattern, entry[1])]

    # --- the API -------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length", 0) or 0)
        raw = handler.rfile.read(length) if length else b""
        with self.lock:
            self.log.append((method, handler.path, json.loads(raw) if raw.strip() else {}))
            fail = next((f for f in self._fail if re.search(f[2], handler.path)), None)
            if fail is not None:
                self._fail.remove(fail)
            slow = next((p for p in self._slow if re.search(p, handler.path)), None)
            if slow is not None:
                self._slow.remove(slow)
        if slow is not None:
            time.sleep(self.slow_seconds)
        if fail is not None:
            headers = {"Retry-After": "0"} if fail[0] == 429 else {}
            return self._send(handler, fail[0], {"error": {"detail": fail[1]}}, headers)
        if handler.headers.get("Authorization") != f"Token {self.token}":
            return self._send(handler, 401, {"error": {"detail": "Invalid token."}})
        try:
            body = json.loads(raw) if raw.strip() else {}
            path, _, query = handler.path.partition("?")
            page = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("page", 1))
            with self.lock:
                status, answer = self._route(method, path, body, page)
        except BadRequest as exc:
            return self._send(handler, exc.status, {"error": {"detail": exc.detail}})
        except (ValueError, KeyError) as exc:
            return self._send(handler, 400, {"error": {"detail": f"bad request: {exc}"}})
        self._send(handler, status, answer)

    def _route(self, method: str, path: str, body: dict, page: int) -> tuple[int, Any]:
        routes = [
            ("POST", r"/api/v1/studies/", self._study_create),
            ("GET", r"/api/v1/studies/([^/]+)/", self._study_get),
            ("POST", r"/api/v1/studies/([^/]+)/transition/", self._study_transition),
            ("GET", r"/api/v1/studies/([^/]+)/submissions/", self._submissions_list),
            ("POST", r"/api/v1/submissions/([^/]+)/transition/", self._submission_transition),
            ("POST", r"/api/v1/study-cost-calculator/", self._cost),
            ("POST", r"/api/v1/submissions/bonus-payments/", self._bonus_setup),
            ("POST", r"/api/v1/bulk-bonus-payments/([^/]+)/pay/", self._bonus_pay),
        ]
        for verb, pattern, route in routes:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                if route == self._submissions_list:
                    return route(body, *match.groups(), page=page)
                return route(body, *match.groups())
        raise BadRequest(404, "Not found.")

    def _study(self, study_id: str) -> dict:
        if study_id not in self.studies:
            raise BadRequest(404, "Not found.")
        return self.studies[study_id]

    def _study_create(self, body: dict) -> tuple[int, dict]:
        problems: dict[str, list[str]] = {}
        for name in (
            "name",
            "description",
            "external_study_url",
            "completion_codes",
            "total_available_places",
            "reward",
            "estimated_completion_time",
        ):
            if body.get(name) in (None, "", []):
                problems[name] = ["This field is required."]
        url = body.get("external_study_url") or ""
        if url and not url.startswith(("http://", "https://")):
            problems["external_study_url"] = ["Enter a valid URL."]
        for code in body.get("completion_codes") or []:
            if (
                not code.get("code")
                or code.get("code_type") not in CODE_TYPES
                or not isinstance(code.get("actions"), list)
            ):
                problems["completion_codes"] = ["Each code needs code, code_type and actions."]
        devices = body.get("device_compatibility", [])
        if not set(devices) <= DEVICES:
            problems["device_compatibility"] = [f"Choose from {sorted(DEVICES)}."]
        for name in ("total_available_places", "reward", "estimated_completion_time"):
            if name not in problems and (not isinstance(body[name], int) or body[name] < 1):
                problems[name] = ["Ensure this value is a whole number of at least 1."]
        if problems:
            raise BadRequest(400, problems)
        study_id = secrets.token_hex(12)
        self.studies[study_id] = {**body, "id": study_id, "status": "UNPUBLISHED"}
        return 201, self.studies[study_id]

    def _study_get(self, body: dict, study_id: str) -> tuple[int, dict]:
        return 200, self._study(study_id)

    def _study_transition(self, body: dict, study_id: str) -> tuple[int, dict]:
        study = self._study(study_id)
        action = body.get("action")
        allowed = {
            "PUBLISH": {"UNPUBLISHED"},
            "PAUSE": {"ACTIVE"},
            "START": {"PAUSED"},
            "STOP": {"ACTIVE", "PAUSED"},
        }
        if action not in allowed:
            raise BadRequest(400, {"action": [f"Choose one of {sorted(allowed)}."]})
        if study["status"] not in allowed[action]:
            raise BadRequest(400, f"A study in status {study['status']} cannot be transitioned with {action}.")
        study["status"] = STUDY_ACTIONS[action]
        return 200, study

    def _submissions_list(self, body: dict, study_id: str, page: int = 1) -> tuple[int, dict]:
        """A page of PAGE_SIZE submissions, with the next page's absolute address in `_links`."""
        self._study(study_id)
        results = [s for s in self.submissions.values() if s["study_id"] == study_id]
        shown = results[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        more = len(results) > page * PAGE_SIZE
        href = f"{self.base_url}/api/v1/studies/{study_id}/submissions/?page={page + 1}" if more else None
        return 200, {"results": shown, "_links": {"next": {"href": href}}, "meta": {"count": len(results)}}

    def _submission_transition(self, body: dict, submission_id: str) -> tuple[int, dict]:
        if submission_id not in self.submissions:
            raise BadRequest(404, "Not found.")
        submission = self.submissions[submission_id]
        action = body.get("action")
        if action == "REJECT":
            if body.get("rejection_category") not in REJECTION_CATEGORIES:
                raise BadRequest(400, {"rejection_category": ["This field is required when rejecting."]})
            if len(body.get("message") or "") < 100:
                raise BadRequest(400, {"message": ["The message must be at least 100 characters long."]})
        elif action != "APPROVE":
            raise BadRequest(400, {"action": ["Choose APPROVE or REJECT."]})
        target = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}[action]
        if submission["status"] == target:  # idempotent, as the reference says
            return 200, submission
        if submission["status"] != "AWAITING REVIEW":
            raise BadRequest(400, f"A submission in status {submission['status']} cannot be {target.lower()}.")
        submission["status"] = target
        return 200, submission

    def _cost(self, body: dict) -> tuple[int, dict]:
        reward, places = Decimal(str(body["reward"])), Decimal(str(body["total_available_places"]))
        total = (reward * places * (1 + FEE)).quantize(Decimal("1"))
        return 200, {"total_cost": float(total)}

    def _bonus_setup(self, body: dict) -> tuple[int, dict]:
        study = self._study(body.get("study_id", ""))
        takers = {s["participant_id"] for s in self.submissions.values() if s["study_id"] == study["id"]}
        rows, wrong = [], []
        for line in (body.get("csv_bonuses") or "").splitlines():
            if not line.strip():
                continue
            participant, _, amount = line.partition(",")
            if participant not in takers:
                wrong.append(participant)
            rows.append((participant, Decimal(amount)))
        if wrong or not rows:
            raise BadRequest(
                400, f"These ids did not take part in the study: {', '.join(wrong)}" if wrong else "No bonuses."
            )
        bonus_id = secrets.token_hex(12)
        amount = sum((a for _, a in rows), Decimal("0"))
        fees = (amount * FEE).quantize(Decimal("0.01"))
        self.bonuses[bonus_id] = {"id": bonus_id, "study": study["id"], "rows": rows}
        answer = {
            "id": bonus_id,
            "study": study["id"],
            "amount": float(amount),
            "fees": float(fees),
            "vat": 0.0,
            "total_amount": float(amount + fees),
        }
        return 201, answer

    def _bonus_pay(self, body: dict, bonus_id: str) -> tuple[int, dict]:
        if bonus_id not in self.bonuses:
            raise BadRequest(404, "Not found.")
        # Not idempotent: every call pays the whole list again.
        self.paid += [(bonus_id, participant, amount) for participant, amount in self.bonuses[bonus_id]["rows"]]
        return 202, {}

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: Any, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout)

    def amount_paid(self, participant: str) -> Decimal:
        return sum((a for _, p, a in self.paid if p == participant), Decimal("0"))


@contextmanager
def prolific_server(*, token: str, slow_seconds: float = 2.0) -> Iterator[ProlificServer]:
    """The stand-in, serving on a free loopback port until the block ends."""
    server = ProlificServer(token=token, slow_seconds=slow_seconds)
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
