"""A small client of Prolific's public API v1 (docs.prolific.com/api-reference), over httpx (the
HTTP library the judges' backends already use).

The base URL is `settings.PROLIFIC_API_URL` (Prolific's own by default; the tests' loopback
stand-in otherwise). The researcher's token is read from the environment, `PROLIFIC_API_TOKEN`,
at each call: it is never stored, logged, nor put in an error message. A 429 (Prolific's wallet
contention) is tried again after its Retry-After or a doubling backoff, a bounded number of times
(`PROLIFIC_MAX_TRIES`); nothing else is tried again, since a POST that timed out may have been
done. Every failure is one exception, `ProlificError`, carrying Prolific's own message.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
from django.conf import settings

TOKEN_VARIABLE = "PROLIFIC_API_TOKEN"  # noqa: S105 - the variable's name, not a token
# The longest wait between two tries of a 429, whatever Retry-After says.
MAX_BACKOFF_SECONDS = 30.0
# Pages of a list read at most (of 20 submissions each by default: 20,000 submissions).
MAX_PAGES = 1000


class ProlificError(Exception):
    """A call to Prolific failed: `status` is its HTTP status (None when no answer came: a
    timeout, a refused connection), the message Prolific's own words where it gave some."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status

    @property
    def answered(self) -> bool:
        """Prolific answered (with an error): the call was not done. Without an answer it may
        have been."""
        return self.status is not None


def _detail(response: httpx.Response) -> str:
    """Prolific's message from an error's body: {"error": {"detail": ...}}, a field's list of
    problems, or the text as it came."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    detail = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):
        detail = detail.get("detail", detail)
    if isinstance(detail, dict):
        return "; ".join(f"{name}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for name, v in detail.items())
    if isinstance(detail, list):
        return " ".join(map(str, detail))
    return str(detail)


class ProlificClient:
    def __init__(self, *, base_url: str | None = None, timeout: float | None = None, max_tries: int | None = None):
        self.base_url = (base_url or settings.PROLIFIC_API_URL).rstrip("/")
        self.timeout = settings.PROLIFIC_TIMEOUT_SECONDS if timeout is None else timeout
        self.max_tries = max(1, settings.PROLIFIC_MAX_TRIES if max_tries is None else max_tries)

    def _headers(self) -> dict[str, str]:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
        if not token:
            raise ProlificError(
                f"no Prolific API token: set {TOKEN_VARIABLE} in the server's environment "
                "(Prolific: Settings, API token); it is never stored here"
            )
        return {"Authorization": f"Token {token}", "Accept": "application/json"}

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        """One call to `path` (under /api/v1/), its JSON answer ({} when it has none)."""
        url = f"{self.base_url}/api/v1/{path.lstrip('/')}"
        headers = self._headers()
        for attempt in range(1, self.max_tries + 1):
            try:
                response = httpx.request(method, url, json=body, headers=headers, timeout=self.timeout)
            except httpx.TimeoutException:
                raise ProlificError(
                    f"Prolific did not answer within {self.timeout:g} s ({method} {path}); nothing was recorded here"
                ) from None
            except httpx.HTTPError as exc:
                raise ProlificError(f"Prolific could not be reached ({method} {path}): {type(exc).__name__}") from None
            if response.status_code == 429 and attempt < self.max_tries:
                time.sleep(self._backoff(response, attempt))
                continue
            if response.status_code >= 400:
                # Some services repeat the credentials they refused: never pass them on.
                detail = _detail(response).replace(headers["Authorization"].removeprefix("Token "), "[token]")
                raise ProlificError(
                    f"Prolific answered {response.status_code} to {method} {path}: {detail}",
                    status=response.status_code,
                )
            return response.json() if response.content.strip() else {}
        raise AssertionError("unreachable: the last try returns or raises")

    @staticmethod
    def _backoff(response: httpx.Response, attempt: int) -> float:
        try:
            wait = float(response.headers.get("Retry-After", ""))
        except ValueError:
            wait = 0.5 * 2 ** (attempt - 1)
        return min(max(wait, 0.0), MAX_BACKOFF_SECONDS)

    # --- the calls the prolific app makes ------------------------------------------------------

    def study_create(self, body: dict) -> dict:
        return self.call("POST", "studies/", body)

    def study_get(self, study_id: str) -> dict:
        return self.call("GET", f"studies/{study_id}/")

    def study_transition(self, study_id: str, action: str) -> dict:
        return self.call("POST", f"studies/{study_id}/transition/", {"action": action})

    def study_cost(self, *, reward: int, places: int) -> dict:
        return self.call("POST", "study-cost-calculator/", {"reward": reward, "total_available_places": places})

    def submissions(self, study_id: str) -> list[dict]:
        """Every submission of the study, page after page (`_links.next`). A next page elsewhere
        than the API's own address is refused: the token is sent to Prolific only."""
        path, found = f"studies/{study_id}/submissions/", []
        for _ in range(MAX_PAGES):
            answer = self.call("GET", path)
            found += answer.get("results", [])
            href = ((answer.get("_links") or {}).get("next") or {}).get("href")
            if not href:
                return found
            prefix = f"{self.base_url}/api/v1/"
            if not href.startswith(prefix):
                raise ProlificError(f"Prolific's next page of submissions is elsewhere ({href}): not followed")
            path = href.removeprefix(prefix)
        raise ProlificError(f"more than {MAX_PAGES} pages of submissions: not all were read")

    def submission_transition(self, submission_id: str, body: dict) -> dict:
        return self.call("POST", f"submissions/{submission_id}/transition/", body)

    def bonuses_set_up(self, *, study_id: str, csv_bonuses: str) -> dict:
        return self.call("POST", "submissions/bonus-payments/", {"study_id": study_id, "csv_bonuses": csv_bonuses})

    def bonuses_pay(self, bulk_id: str) -> dict:
        """Not idempotent on Prolific's side: every call pays again (prolific.services guards it)."""
        return self.call("POST", f"bulk-bonus-payments/{bulk_id}/pay/")
