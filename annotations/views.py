"""The rater's task: the page with their current item and the vote on it, from one view (a
page, or with htmx the fragment that replaces the task).

The rater comes from their signed cookie (pages.cookie_rater, one query; a vote reads them with
its lease instead); nothing in a URL or form names an item: a vote goes against the lease token
of the rater's own current item, and annotations.assignment does the work. A plain form post is
answered with a redirect to the page (so a reload never re-posts), an htmx post with the next
item's fragment.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from annotations import assignment, pages
from annotations.forms import VoteForm
from annotations.models import Lease, Rater, Study


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@pages.database_failures_answered
def study_task(request: HttpRequest, slug: str) -> HttpResponse:
    """The current item. A POST records the vote on the rater's own lease, then shows the next
    item: as an htmx fragment, or by redirecting to GET so that a reload never re-posts."""
    form = VoteForm(request.POST) if request.method == "POST" else None
    rater_id = pages.cookie_rater_id(request, slug)
    if form is not None and form.is_valid() and rater_id is not None:
        return _vote(request, slug, rater_id, form.cleaned_data)
    # A page, or a malformed vote shown its form's errors: the rater from their cookie.
    rater = pages.cookie_rater(request, slug)
    if rater is None:
        return pages.leave_for(request, reverse("annotations:landing", args=[slug]))
    status, notice = (200, request.GET.get("notice")) if form is None else (400, None)
    response = _task_response(request, rater, rater.pending_lease, form=form, status=status, notice=notice)
    return pages.mturk_frame(response, rater.study)


def _vote(request: HttpRequest, slug: str, rater_id: int, data: dict) -> HttpResponse:
    try:
        outcome = assignment.vote_record(
            rater_id=rater_id,
            slug=slug,
            token=data["token"],
            choice_shown=data["choice"],
            not_familiar=data["not_familiar"],
            client_ms=data["client_ms"],
            hand_out_next=True,
            rate=settings.RATER_VOTE_RATE,
            drafts=pages.is_staff(request),
        )
        rater, notice = outcome.rater, _vote_notice(outcome)
    except Rater.DoesNotExist:  # deleted, or the study moved, since the cookie was set
        return pages.leave_for(request, reverse("annotations:landing", args=[slug]))
    except Study.DoesNotExist:  # a draft, for anyone but staff
        raise Http404("No such study.") from None
    except assignment.TooManyVotes as exc:
        return pages.mturk_frame(
            pages.try_again(request, status=429, retry_after=exc.retry_after, reason="rate"), exc.rater.study
        )
    except assignment.LeaseNotFound as exc:
        rater, notice = exc.rater, "not_yours"
    if request.htmx:
        response = _task_response(request, rater, None, notice=notice)
    else:
        response = HttpResponseRedirect(request.path + (f"?notice={notice}" if notice else ""))
    return pages.mturk_frame(response, rater.study)


# What the task page tells a rater about the vote they just sent, when it is not the usual
# "recorded" (the notice's key travels in the query string after a plain form post).
TASK_NOTICES = {
    "stale": "That item had already been answered, perhaps in another tab or window, so the answer you just "
    "gave was not stored. This is your current item.",
    "not_yours": "That item is not one of yours any more (did you enter again with another participant id?), "
    "so the answer you just gave was not stored. This is your current item.",
    "fast": "That was fast! Please take the time to read the question and both answers: very quick answers "
    "are left out of the results.",
}


def _vote_notice(outcome: assignment.VoteOutcome) -> str | None:
    if not outcome.created:
        return "stale"
    if outcome.rater.study.fast_notice and outcome.vote.meta["assignment"]["too_fast"]:
        return "fast"
    return None


def _task_response(
    request: HttpRequest,
    rater: Rater,
    pending: Lease | None,
    *,
    form: VoteForm | None = None,
    status: int = 200,
    notice: str | None = None,
) -> HttpResponse:
    """The rater's current item (handed out now if need be), or off to the done page."""
    lease = assignment.lease_next(rater=rater, pending=pending)
    study = rater.study
    if lease is None:
        return pages.leave_for(request, reverse("annotations:done", args=[study.slug]))
    context = {
        "study": study,
        "rater": rater,
        "form": form,
        "done": rater.votes_done,
        "notice": TASK_NOTICES.get(notice or ""),
        "token": lease.token,
        **lease.page,
    }
    template = "annotations/task.html#task" if request.htmx else "annotations/task.html"
    return render(request, template, context, status=status)
