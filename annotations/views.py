"""The rater's task: the page with their current item and the vote on it, from one view (a
page, or with htmx the fragment that replaces the task).

The rater comes from their signed cookie (annotations.pages.cookie_rater, one query); nothing in
a URL or form names an item: a vote goes against the lease token of the rater's own current
item, and annotations.assignment does the work. A plain form post is answered with a redirect
to the page (so a reload never re-posts), an htmx post with the next item's fragment.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from annotations import assignment
from annotations.forms import VoteForm
from annotations.models import Lease, Rater, Study
from annotations.pages import cookie_rater, database_failures_answered, leave_for, mturk_frame, try_again


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@database_failures_answered
def study_task(request: HttpRequest, slug: str) -> HttpResponse:
    """The current item. A POST records the vote on the rater's own lease, then shows the next
    item: as an htmx fragment, or by redirecting to GET so that a reload never re-posts."""
    rater = cookie_rater(request, slug)
    if rater is None:
        return leave_for(request, reverse("annotations:landing", args=[slug]))
    return mturk_frame(_task(request, rater), rater.study)


def _task(request: HttpRequest, rater: Rater) -> HttpResponse:
    # The rater's pending lease was read with them: the page needs no other read, unless a vote
    # changed it.
    if request.method == "GET":
        return _task_response(request, rater, rater.pending_lease, notice=request.GET.get("notice"))
    form = VoteForm(request.POST)
    if not form.is_valid():
        return _task_response(request, rater, rater.pending_lease, form=form, status=400)
    data = form.cleaned_data
    try:
        outcome = assignment.vote_record(
            rater=rater,
            token=data["token"],
            choice_shown=data["choice"],
            not_familiar=data["not_familiar"],
            client_ms=data["client_ms"],
            hand_out_next=True,
            rate=settings.RATER_VOTE_RATE,
        )
    except Rater.DoesNotExist:  # deleted since the cookie was read
        return leave_for(request, reverse("annotations:landing", args=[rater.study.slug]))
    except assignment.TooManyVotes as exc:
        return try_again(request, status=429, retry_after=exc.retry_after, reason="rate")
    except assignment.LeaseNotFound:
        notice = "not_yours"
    else:
        notice = _vote_notice(outcome, rater.study)
    if not request.htmx:
        return HttpResponseRedirect(request.path + (f"?notice={notice}" if notice else ""))
    return _task_response(request, rater, None, notice=notice)


# What the task page tells a rater about the vote they just sent, when it is not the usual
# "recorded" (the notice's key travels in the query string after a plain form post).
TASK_NOTICES = {
    "stale": "That item had already been answered, perhaps in another tab or window, so the answer you just "
    "gave was not stored. This is your current item.",
    "not_yours": "That item is not one of yours any more (did you enter again with another participant id?), "
    "so the answer you just gave was not stored. This is your current item.",
    "fast": "That was fast! Please take the time to read the question and both answers: very quick answers "
    "are not counted.",
}


def _vote_notice(outcome: assignment.VoteOutcome, study: Study) -> str | None:
    if not outcome.created:
        return "stale"
    if study.fast_notice and outcome.vote.meta["assignment"]["too_fast"]:
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
        return leave_for(request, reverse("annotations:done", args=[study.slug]))
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
