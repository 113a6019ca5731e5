"""The rater pages around the task (annotations.views), and what every rater page shares.

Shared: a rater is known only through a signed cookie set when they enter a study
(`rater-<slug>`: their Rater pk, signed with SECRET_KEY and timestamped), read with one query;
a failure the rater can wait out (database down, too many requests) is a "try again" page or
alert; a study may let MTurk show its rater pages inside its HIT frame (`mturk_frame`), every
other page refuses to be framed. The pages: the list of studies, a study's landing page, where a
rater enters, and the done page, with the completion code once they have earned it
(annotations.completion), with the way back to Prolific a few seconds later, or handed back
to MTurk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import wraps
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from csp.decorators import csp_replace, csp_update
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from annotations import assignment, completion, ratelimit
from annotations.forms import EnterForm, PlatformForm, turk_submit_origin
from annotations.models import Rater, Study

log = logging.getLogger(__name__)

# Seconds a rater is asked to wait after the database failed them.
DATABASE_RETRY_AFTER = 5


def try_again(request: HttpRequest, *, status: int, retry_after: int, reason: str) -> HttpResponse:
    """A friendly "please try again" for a failure the rater can wait out (429, 503). Nothing
    was recorded, so sending the same answer again is safe. htmx requests get a short alert in
    the task form, which stays as it was; other requests a whole page."""
    # A vote that was not stored is sent again; anything else (entering, a page) is reloaded.
    voted = request.method == "POST" and request.resolver_match.url_name == "task"
    context = {"reason": reason, "retry_after": retry_after, "voted": voted}
    if request.htmx:
        response = render(request, "annotations/try_again.html#alert", context, status=status)
        response = reswap(retarget(response, "#task-alert"), "innerHTML")
    else:
        response = render(request, "annotations/try_again.html", context, status=status)
    response["Retry-After"] = str(retry_after)
    return response


def database_failures_answered(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A database that is restarting, unreachable or locked too long gives the rater a 503 "try
    again" instead of a server error; the transaction was rolled back, so nothing is half stored."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            log.warning("database unavailable for %s %s: %s", request.method, request.path, exc)
            return try_again(request, status=503, retry_after=DATABASE_RETRY_AFTER, reason="database")

    return wrapper


# The rater's identity is a signed cookie per study, not the session: a rater leaves no session
# row behind and reading it costs no query. Like the session cookie it is a bearer secret:
# HttpOnly, Secure and SameSite as the session cookie is, and valid for SESSION_COOKIE_AGE after
# entering. It cannot be forged without SECRET_KEY.
_RATER_SALT = "annotations.views.rater"  # its old home: a new salt would sign every rater out


def rater_cookie_name(slug: str) -> str:
    return f"rater-{slug}"


def remember_rater(response: HttpResponse, rater: Rater) -> HttpResponse:
    response.set_signed_cookie(
        rater_cookie_name(rater.study.slug),
        str(rater.pk),
        salt=_RATER_SALT,
        max_age=settings.SESSION_COOKIE_AGE,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite=settings.SESSION_COOKIE_SAMESITE,
    )
    return response


def cookie_rater_id(request: HttpRequest, slug: str) -> int | None:
    """The rater id the study's cookie names, if it is valid (no query: nothing says yet that
    the rater exists)."""
    value = request.get_signed_cookie(
        rater_cookie_name(slug), default=None, salt=_RATER_SALT, max_age=settings.SESSION_COOKIE_AGE
    )
    return int(value) if value and value.isdigit() else None


def cookie_rater(request: HttpRequest, slug: str) -> Rater | None:
    """The rater the cookie names in the study of this slug, with their study and their pending
    lease (one query: assignment.rater_in_study); None without a valid cookie. A draft is not
    found for anyone but staff."""
    rater_id = cookie_rater_id(request, slug)
    rater = None if rater_id is None else assignment.rater_in_study(rater_id, slug)
    if rater is not None and rater.study.status == Study.Status.DRAFT and not is_staff(request):
        raise Http404("No such study.")
    return rater


def is_staff(request: HttpRequest) -> bool:
    """Whether a staff user is signed in. Staff sign in with the session cookie: without one,
    the lazy `request.user` (the session, then the user) is not set up for nothing."""
    return settings.SESSION_COOKIE_NAME in request.COOKIES and request.user.is_staff


def leave_for(request: HttpRequest, url: str) -> HttpResponse:
    """Leave the task fragment for another page, with or without htmx."""
    return HttpResponseClientRedirect(url) if request.htmx else HttpResponseRedirect(url)


def mturk_frame(response: HttpResponse, study: Study) -> HttpResponse:
    """Let MTurk's sites (settings.BIASSTUDY_MTURK_FRAME_ANCESTORS) frame this rater page, when
    the study allows it (Study.allow_mturk_frame), with SameSite=None cookies
    (annotations.middleware); every other page stays DENY and frame-ancestors 'none'."""
    if not study.allow_mturk_frame:
        return response
    # The study is known only inside the view, so the two libraries' view decorators are
    # applied to a view that returns the response already made.
    allow = csp_replace({"frame-ancestors": settings.BIASSTUDY_MTURK_FRAME_ANCESTORS})
    response = allow(xframe_options_exempt(lambda: response))()
    response.frame_cookies = True
    return response


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    studies = Study.objects.filter(status=Study.Status.COLLECTING).order_by("title")
    return render(request, "annotations/home.html", {"studies": studies})


# A study that lets MTurk frame it: a browser that blocks third-party cookies sends none from
# inside the frame. The landing finds that out before the rater fills anything in: its first
# answer sets a check cookie and sends the browser back with ?cookie_check=1. Without the cookie
# then, the page offers the task in a new tab.
FRAME_CHECK = "cookie_check"


@require_http_methods(["GET", "POST"])
@database_failures_answered
def study_landing(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if study.status == Study.Status.DRAFT and not is_staff(request):  # drafts exist for staff only
        raise Http404("No such study.")
    return mturk_frame(_landing(request, study), study)


def _landing(request: HttpRequest, study: Study) -> HttpResponse:
    platform_form = PlatformForm(request.GET)
    current = cookie_rater(request, study.slug)
    platform = platform_form.platform()
    if current is not None and (platform is None or platform[1] == current.participant_id):
        return redirect("annotations:task", slug=study.slug)
    if study.allow_mturk_frame and request.method == "GET" and FRAME_CHECK not in request.GET:
        return _check_cookies(request)
    arrival = _Arrival.of(request, study, platform_form)
    if request.method == "POST":
        entered = _enter(request, study, arrival)
        if entered is not None:
            return entered
    return _landing_page(request, study, arrival)


@dataclass
class _Arrival:
    """Who arrives at the landing page, as their link and form say."""

    platform_form: PlatformForm
    platform: tuple[str, str, dict] | None  # (source, participant id, meta) from a platform's link
    preview: bool  # MTurk's preview of a HIT: nobody may enter from it
    # Whoever the platform link names, if they took part: they get back in (to their code)
    # when the study is full, and are not asked to consent again.
    consented_at: datetime | None
    form: EnterForm
    # A study whose every slot has its vote takes nobody new; whoever took part still gets back
    # in (to their code): a platform link that names them, or the id they type on the full page.
    full: bool

    @property
    def platform_id(self) -> str | None:
        return self.platform[1] if self.platform else None

    @classmethod
    def of(cls, request: HttpRequest, study: Study, platform_form: PlatformForm) -> _Arrival:
        platform = platform_form.platform()
        returning = None
        if platform is not None:
            returning = Rater.objects.filter(study=study, participant_id=platform[1]).only("consent_at").first()
        consented_at = returning.consent_at if returning else None
        # Bound on every POST: a returning rater's form may have no field at all to send.
        data = request.POST if request.method == "POST" else None
        form = EnterForm(data, platform_id=platform[1] if platform else None, consented=consented_at is not None)
        collecting = study.status == Study.Status.COLLECTING
        full = collecting and returning is None and completion.study_is_full(study=study)
        preview = platform_form.is_mturk_preview()
        return cls(platform_form, platform, preview, consented_at, form, full)


def _enter(request: HttpRequest, study: Study, arrival: _Arrival) -> HttpResponse | None:
    """A posted entry: the rater in, on to their task; None when the page is to be shown again
    (the form's errors, a preview, a study not collecting)."""
    limited = _over_limit(request, "enter", ratelimit.client_address(request), settings.RATER_ENTRY_RATE)
    if limited is not None:
        return limited
    form = arrival.form
    if study.status != Study.Status.COLLECTING or arrival.preview or not form.is_valid():
        return None
    source, participant_id, meta = arrival.platform or (Rater.Source.DIRECT, form.cleaned_data["participant_id"], {})
    if arrival.full and not Rater.objects.filter(study=study, participant_id=participant_id.strip()).exists():
        if arrival.platform is None:
            form.add_error(
                "participant_id", "Nobody has taken part with this id, and the study is full: it takes no one new."
            )
        return None
    rater = completion.rater_enter(study=study, participant_id=participant_id, source=source, source_meta=meta)
    return remember_rater(redirect("annotations:task", slug=study.slug), rater)


def _landing_page(request: HttpRequest, study: Study, arrival: _Arrival) -> HttpResponse:
    new_tab_query = request.GET.copy()
    new_tab_query.pop(FRAME_CHECK, None)
    form = arrival.form
    context = {
        "study": study,
        "form": form,
        "full": arrival.full,
        # On a full study only someone who took part may enter, by typing their id.
        "resume_form": arrival.full and arrival.platform_id is None and not arrival.preview,
        "platform_id": arrival.platform_id,
        "consented_at": arrival.consented_at,
        "preview": arrival.preview,
        "link_problems": arrival.platform_form.id_problems(),
        "query": request.GET.urlencode(),
        # Inside MTurk's frame, after the check: a browser that blocks third-party cookies.
        "cookies_blocked": study.allow_mturk_frame and request.method == "GET" and FRAME_CHECK not in request.COOKIES,
        "new_tab_query": new_tab_query.urlencode(),
    }
    return render(request, "annotations/landing.html", context, status=400 if form.errors else 200)


def _check_cookies(request: HttpRequest) -> HttpResponse:
    query = request.GET.copy()
    query[FRAME_CHECK] = "1"
    response = HttpResponseRedirect(f"{request.path}?{query.urlencode()}")
    response.set_cookie(FRAME_CHECK, "1", max_age=settings.SESSION_COOKIE_AGE, httponly=True)
    return response


def _over_limit(request: HttpRequest, scope: str, key: str, rate: tuple[int, int]) -> HttpResponse | None:
    retry_after = ratelimit.hit(scope, key, rate=rate)  # a database outage: database_failures_answered
    if retry_after is None:
        return None
    return try_again(request, status=429, retry_after=retry_after, reason="entry")


@require_GET
@database_failures_answered
def study_done(request: HttpRequest, slug: str) -> HttpResponse:
    """Where a rater lands when they get no item: asked to wait while other raters hold what is
    left; their completion code once they voted and the study can give them nothing more (their
    target reached counts as that); else a page without a code."""
    rater = cookie_rater(request, slug)
    if rater is None:
        return redirect("annotations:landing", slug=slug)
    return mturk_frame(_done(request, rater), rater.study)


def _done(request: HttpRequest, rater: Rater) -> HttpResponse:
    study = rater.study
    if assignment.lease_next(rater=rater, pending=rater.pending_lease) is not None:
        return redirect("annotations:task", slug=study.slug)
    waiting = completion.rater_can_get_more(rater=rater)
    code = completion.rater_finish(rater=rater) if not waiting and rater.votes_done > 0 else None
    mturk = _mturk_submit(rater) if code else None
    context = {
        "study": study,
        "rater": rater,
        "done": rater.votes_done,
        "waiting": waiting,
        "code": code,
        "mturk": mturk,
        "platform_return": _prolific_return(rater, code) or _platform_return(rater, code),
    }
    response = render(request, "annotations/done.html", context)
    if mturk:
        # The page posts the assignment to MTurk (or a loopback stand-in): allow that one target.
        # The origin is known only now, so django-csp's decorator wraps a view returning the response.
        response = csp_update({"form-action": [mturk["origin"]]})(lambda: response)()
    return response


def _mturk_submit(rater: Rater) -> dict | None:
    """Where and what an MTurk worker's done page posts back (the ExternalQuestion protocol:
    `assignmentId` to <turkSubmitTo>/mturk/externalSubmit), or None. The endpoint was checked
    when the worker entered and is checked again here: only MTurk's two hosts or loopback."""
    meta = rater.source_meta or {}
    submit_to, assignment_id = meta.get("turkSubmitTo", ""), meta.get("assignmentId", "")
    if rater.source != Rater.Source.MTURK or not submit_to or not assignment_id:
        return None
    try:
        origin = turk_submit_origin(submit_to)  # stored so; checked again, for rows stored before
    except ValidationError:
        return None
    return {
        "action": f"{origin}/mturk/externalSubmit",
        "origin": origin,
        "assignment_id": assignment_id,
    }


def _prolific_return(rater: Rater, code: str | None) -> dict | None:
    """Where the done page takes a Prolific rater who finished, and after how many seconds.
    Not an immediate redirect: when Prolific is down or blocked the rater would see a browser
    error instead of their code. The page shows the code first, with a link to go back now."""
    url = rater.study.prolific_completion_url
    if not code or rater.source != Rater.Source.PROLIFIC or not url:
        return None
    return {"url": _with_code(url, code), "platform": "Prolific", "seconds": settings.BIASSTUDY_PLATFORM_RETURN_SECONDS}


def _platform_return(rater: Rater, code: str | None) -> dict | None:
    """Where the done page takes a rater who came by the participant link (any other platform)
    and finished: the study's other-platform completion URL with their code, as for Prolific."""
    if not code or rater.source != Rater.Source.DIRECT or not rater.study.platform_completion_url:
        return None
    return {
        "url": rater.study.platform_return_url(code),
        "platform": "the platform you came from",
        "seconds": settings.BIASSTUDY_PLATFORM_RETURN_SECONDS,
    }


def _with_code(url: str, code: str) -> str:
    """Prolific's completion URL with `cc=<code>` (kept as is when the study put it there)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.setdefault("cc", code)
    return urlunsplit(parts._replace(query=urlencode(query)))
