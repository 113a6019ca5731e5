"""The rater's pages: study landing, the task (page and htmx fragment from one view), completion.

A rater is known only through a signed cookie set when they enter a study (`rater-<study id>`:
their Rater pk, signed with SECRET_KEY and timestamped); nothing in a URL or form names an item, a
vote goes against the lease token of the rater's own current item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh, reswap, retarget

from annotations import assignment, ratelimit
from annotations.forms import EnterForm, PlatformForm, VoteForm
from annotations.models import Lease, Rater, Study

log = logging.getLogger(__name__)

# Seconds a rater is asked to wait after the database failed them.
DATABASE_RETRY_AFTER = 5


def _try_again(request: HttpRequest, *, status: int, retry_after: int, reason: str) -> HttpResponse:
    """A friendly "please try again" for a failure the rater can wait out (429, 503). Nothing
    was recorded, so sending the same answer again is safe. htmx requests get a short alert in
    the task form, which stays as it was; other requests a whole page."""
    context = {"reason": reason, "retry_after": retry_after, "posted": request.method == "POST"}
    if request.htmx:
        response = render(request, "annotations/try_again.html#alert", context, status=status)
        response = reswap(retarget(response, "#task-alert"), "innerHTML")
    else:
        response = render(request, "annotations/try_again.html", context, status=status)
    response["Retry-After"] = str(retry_after)
    return response


def _database_failures_answered(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A database that is restarting, unreachable or locked too long gives the rater a 503 "try
    again" instead of a server error; the transaction was rolled back, so nothing is half stored."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            log.warning("database unavailable for %s %s: %s", request.method, request.path, exc)
            return _try_again(request, status=503, retry_after=DATABASE_RETRY_AFTER, reason="database")

    return wrapper


def _over_limit(request: HttpRequest, scope: str, key: str, rate: tuple[int, int]) -> HttpResponse | None:
    retry_after = ratelimit.hit(scope, key, rate=rate)
    if retry_after is None:
        return None
    return _try_again(request, status=429, retry_after=retry_after, reason="rate")


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    studies = Study.objects.filter(status=Study.Status.COLLECTING).order_by("title")
    return render(request, "annotations/home.html", {"studies": studies})


# Study ids by slug, filled as studies are looked up, so that the task view reads its rater and
# study in one statement. A stale entry (a slug renamed or reused) only costs the slow look-up:
# the statement checks the slug against the id.
_study_ids: dict[str, int] = {}


def _study_or_404(request: HttpRequest, slug: str) -> Study:
    """Raters see collecting and closed studies; drafts only exist for staff."""
    study = get_object_or_404(Study, slug=slug)
    if study.status == Study.Status.DRAFT and not _is_staff(request):
        raise Http404("No such study.")
    _study_ids[slug] = study.pk
    return study


# The rater's identity is a signed cookie, not the session: reading it costs no query (the
# session was one per request, an eighth of the page and vote's statements on PostgreSQL,
# docs/BENCHMARKS.md section 1.7), and a rater leaves no session row behind. Like the session
# cookie it is a bearer secret: HttpOnly, Secure and SameSite as the session cookie is, and
# valid for SESSION_COOKIE_AGE after entering. It cannot be forged without SECRET_KEY.
_RATER_SALT = "annotations.views.rater"


def _rater_cookie(study_id: int) -> str:
    return f"rater-{study_id}"


def _cookie_rater_id(request: HttpRequest, study_id: int) -> int | None:
    """The rater id of this study's cookie, if it is there, signed by us and not too old."""
    value = request.get_signed_cookie(
        _rater_cookie(study_id), default=None, salt=_RATER_SALT, max_age=settings.SESSION_COOKIE_AGE
    )
    return int(value) if value is not None and value.isdigit() else None


def _remember_rater(response: HttpResponse, rater: Rater) -> HttpResponse:
    response.set_signed_cookie(
        _rater_cookie(rater.study_id),
        str(rater.pk),
        salt=_RATER_SALT,
        max_age=settings.SESSION_COOKIE_AGE,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite=settings.SESSION_COOKIE_SAMESITE,
    )
    return response


def _cookie_rater(request: HttpRequest, study: Study) -> Rater | None:
    rater_id = _cookie_rater_id(request, study.pk)
    if rater_id is None:
        return None
    rater = Rater.objects.filter(pk=rater_id, study=study).first()
    if rater is not None:
        rater.study = study  # already read: the assignment services use it without reading it again
    return rater


def _rater_ref(request: HttpRequest, slug: str, *, look_up: bool = False) -> assignment.RaterRef | None:
    """The rater of the study of this slug that the cookie names, not read yet (None without a
    valid cookie). The study's id comes from this process's memory; it is looked up (404 for a
    draft) when not known yet, or with `look_up`."""
    if look_up or slug not in _study_ids:
        _study_or_404(request, slug)
    return _known_rater_ref(request, slug)


def _known_rater_ref(request: HttpRequest, slug: str) -> assignment.RaterRef | None:
    """As `_rater_ref`, without a query: None too when this process does not know the slug."""
    study_id = _study_ids.get(slug)
    rater_id = _cookie_rater_id(request, study_id) if study_id is not None else None
    if rater_id is None:
        return None
    return assignment.RaterRef(rater_id, study_id, slug, drafts=_is_staff(request))


def _is_staff(request: HttpRequest) -> bool:
    """Whether a staff user is signed in. Staff sign in with the session cookie: without one,
    the lazy `request.user` (the session, then the user) is not set up for nothing."""
    return settings.SESSION_COOKIE_NAME in request.COOKIES and request.user.is_staff


def _study_and_rater(request: HttpRequest, slug: str, *, page: bool = False) -> tuple[Study, Rater | None, object]:
    """The study of the URL, the cookie's rater in it (None if they have not entered) and,
    with `page`, their pending lease page when it could be read in the same statement (else
    `assignment.UNREAD`), for `assignment.lease_next(pending=...)`."""
    ref = _known_rater_ref(request, slug)
    if ref is not None:
        if page:
            read = assignment.rater_with_study_and_page(ref)
            found, pending = read if read is not None else (None, assignment.UNREAD)
        else:
            found, pending = assignment.rater_with_study(ref), assignment.UNREAD
        if found is not None:
            return found.study, found, pending
    study = _study_or_404(request, slug)
    return study, _cookie_rater(request, study), assignment.UNREAD


def _redirect(request: HttpRequest, url: str) -> HttpResponse:
    """Leave the task fragment for another page, with or without htmx."""
    return HttpResponseClientRedirect(url) if request.htmx else HttpResponseRedirect(url)


def _to_landing(request: HttpRequest, slug: str) -> HttpResponse:
    return _redirect(request, reverse("annotations:landing", args=[slug]))


@require_http_methods(["GET", "POST"])
@_database_failures_answered
def study_landing(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study_or_404(request, slug)
    platform_form = PlatformForm(request.GET)
    platform = platform_form.platform()
    preview = platform_form.is_mturk_preview()
    current = _cookie_rater(request, study)
    if current is not None and (platform is None or platform[1] == current.participant_id):
        return redirect("annotations:task", slug=study.slug)

    platform_id = platform[1] if platform else None
    form = EnterForm(request.POST or None, platform_id=platform_id, initial={"target": study.target_per_rater})
    if request.method == "POST":
        limited = _over_limit(request, "enter", ratelimit.client_address(request), settings.RATER_ENTRY_RATE)
        if limited is not None:
            return limited
    if request.method == "POST" and study.status == Study.Status.COLLECTING and not preview and form.is_valid():
        source, participant_id, meta = platform or (Rater.Source.DIRECT, form.cleaned_data["participant_id"], {})
        rater = assignment.rater_enter(
            study=study,
            participant_id=participant_id,
            source=source,
            source_meta=meta,
            target=form.cleaned_data.get("target"),
        )
        return _remember_rater(redirect("annotations:task", slug=study.slug), rater)
    context = {
        "study": study,
        "form": form,
        "platform_id": platform_id,
        "preview": preview,
        "query": request.GET.urlencode(),
    }
    return render(request, "annotations/landing.html", context, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@_database_failures_answered
def study_task(request: HttpRequest, slug: str) -> HttpResponse:
    """The current item. A POST records the vote on the rater's own lease, then shows the next
    item: as an htmx fragment, or by redirecting to GET so that a reload never re-posts."""
    if request.method == "POST":
        return _vote(request, slug)
    study, rater, pending = _study_and_rater(request, slug, page=True)
    if rater is None:
        return _to_landing(request, study.slug)
    return _task_response(request, study, rater, form=None, pending=pending)


def _vote(request: HttpRequest, slug: str) -> HttpResponse:
    """The vote of `study_task`. The rater is read, and locked, by the statement that records
    the vote (`assignment.RaterRef`): a vote reads nothing before it."""
    ref = _rater_ref(request, slug)
    if ref is None:
        return _to_landing(request, slug)
    limited = _over_limit(request, "vote", f"{ref.study_id}:{ref.rater_id}", settings.RATER_VOTE_RATE)
    if limited is not None:
        return limited
    form = VoteForm(request.POST)
    if not form.is_valid():
        study, rater, pending = _study_and_rater(request, slug, page=True)
        if rater is None:
            return _to_landing(request, slug)
        return _task_response(request, study, rater, form=form, status=400, pending=pending)
    data = form.cleaned_data
    vote = {
        "token": data["token"],
        "choice_shown": data["choice"],
        "not_familiar": data["not_familiar"],
        "client_ms": data["client_ms"],
        "hand_out_next": True,
    }
    try:
        try:
            outcome = assignment.vote_record(rater=ref, **vote)
        except Rater.DoesNotExist:
            # The rater is gone, or the study's slug or status changed since this process
            # learnt its id: once more with the study looked up again (404 for a draft).
            if (ref := _rater_ref(request, slug, look_up=True)) is None:
                return _to_landing(request, slug)
            outcome = assignment.vote_record(rater=ref, **vote)
    except Rater.DoesNotExist:
        return _to_landing(request, slug)
    except assignment.LeaseNotFound:
        if request.htmx:
            return HttpResponseClientRefresh()
        raise Http404("This item is not one of yours.") from None
    if not request.htmx:
        return HttpResponseRedirect(request.path)  # this view's own address: no reverse() needed
    rater = outcome.vote.rater
    return _task_response(request, rater.study, rater, form=None)


def _task_response(
    request: HttpRequest,
    study: Study,
    rater: Rater,
    *,
    form: VoteForm | None,
    status: int = 200,
    pending: object = assignment.UNREAD,
) -> HttpResponse:
    lease = assignment.lease_next(rater=rater, pending=pending)
    if lease is None:
        return _redirect(request, reverse("annotations:done", args=[study.slug]))
    done = rater.votes_done
    context = {"study": study, "rater": rater, "form": form, "done": done, **_sides(lease)}
    template = "annotations/task.html#task" if request.htmx else "annotations/task.html"
    return render(request, template, context, status=status)


def _sides(lease: Lease) -> dict:
    """What the page shows: answers in the lease's order, never which one is which."""
    item = lease.item
    left, right = (item.answer_a1, item.answer_a2) if lease.shown_first == "a1" else (item.answer_a2, item.answer_a1)
    return {"token": lease.token, "question": item.question, "left": left, "right": right}


@require_GET
@_database_failures_answered
def study_done(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study_or_404(request, slug)
    rater = _cookie_rater(request, study)
    if rater is None:
        return redirect("annotations:landing", slug=study.slug)
    if assignment.lease_next(rater=rater) is not None:
        return redirect("annotations:task", slug=study.slug)
    if rater.source == Rater.Source.PROLIFIC and study.prolific_completion_url and study.completion_code:
        return HttpResponseRedirect(_with_code(study.prolific_completion_url, study.completion_code))
    done = rater.votes_done
    waiting = assignment.rater_may_wait(rater=rater)
    context = {"study": study, "rater": rater, "done": done, "waiting": waiting}
    return render(request, "annotations/done.html", context)


def _with_code(url: str, code: str) -> str:
    """Prolific's completion URL with `cc=<code>` (kept as is when the study put it there)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.setdefault("cc", code)
    return urlunsplit(parts._replace(query=urlencode(query)))
