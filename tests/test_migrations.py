"""Data migrations on rows that exist: written with the schema before, migrated forward."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotations import assignment
from annotations.models import Answer, ComparisonItem, Lease, Question, Slot
from biasstudy import rendering
from tests.factories import make_question, make_rater, make_study, make_variant


def _migrate_to(name: str) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([("annotations", name)])


def _migrate_across(before: str, after: str) -> None:
    """Back to ``before`` and forward through ``after``, then to the latest state again."""
    _migrate_to(before)
    try:
        _migrate_to(after)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_leases_handed_out_before_0008_get_their_items_question():
    study = make_study(one_variant_per_question=True)
    for _ in range(3):
        make_variant(make_question(study), kind="reference")
    raters = [make_rater(study) for _ in range(2)]
    for rater in raters:
        lease = assignment.lease_next(rater=rater)
        assignment.vote_record(
            rater_id=rater.pk,
            slug=rater.study.slug,
            token=lease.token,
            choice_shown="tie",
            client_ms=9000,
            hand_out_next=True,
        )
    _migrate_across("0007_rater_votes_done", "0008_lease_question")
    leases = list(Lease.objects.select_related("item"))
    assert len(leases) == 4
    assert all(lease.question_id == lease.item.question_id for lease in leases)
    assert len({lease.question_id for lease in leases}) >= 2


@pytest.mark.django_db(transaction=True)
def test_items_from_before_0011_get_their_slots_closed_by_their_counted_votes_and_held_by_pending_leases():
    study = make_study(votes_per_item=4)
    for _ in range(2):
        make_question(study)
    voter, holder = make_rater(study), make_rater(study)
    lease = assignment.lease_next(rater=voter)
    assignment.vote_record(
        rater_id=voter.pk, slug=voter.study.slug, token=lease.token, choice_shown="tie", client_ms=9000
    )
    pending = assignment.lease_next(rater=holder)
    _migrate_across("0010_vote_labels_swapped", "0011_slot_queue")
    for item in ComparisonItem.objects.filter(study=study):
        orders = sorted(item.slots.values_list("shown_first", flat=True))
        assert orders == ["a1", "a1", "a2", "a2"], item
    closed = Slot.objects.get(vote__isnull=False)
    assert (closed.item_id, closed.shown_first) == (lease.item_id, lease.shown_first)
    held = Slot.objects.get(rater__isnull=False, vote__isnull=True)  # since 0019: by the rater of that lease
    assert (held.item_id, held.rater_id, held.shown_first) == (pending.item_id, holder.pk, pending.shown_first)


@pytest.mark.django_db(transaction=True)
def test_renders_stored_before_0016_are_stored_again_under_the_new_rendering_code():
    study = make_study()
    question = make_question(study, text="Run `a&b`, see https://example.org&#160;now.", a1="Plain *first*.")
    first, second = question.answers.order_by("pk")
    # Renders as the code before 0016 stored them: another key (and here another HTML).
    Question.objects.filter(pk=question.pk).update(text_html="<p>old</p>", text_html_key="0" * 40)
    Answer.objects.filter(pk=first.pk).update(text_html="<p>old</p>", text_html_key="0" * 40)
    kept = Answer.objects.values_list("text_html", "text_html_key").get(pk=second.pk)
    _migrate_across("0015_study_allow_mturk_frame", "0016_refresh_stored_renders")
    for row in [Question.objects.get(pk=question.pk), Answer.objects.get(pk=first.pk)]:
        assert row.text_html_key == rendering.render_key(row.text)
        assert row.text_html == rendering.render_markdown(row.text) != "<p>old</p>"
    assert Question.objects.get(pk=question.pk).text_html.count("<code>a&amp;b</code>") == 1
    assert Answer.objects.values_list("text_html", "text_html_key").get(pk=second.pk) == kept


@pytest.mark.django_db(transaction=True)
def test_renders_stored_before_0017_with_a_linked_ftp_url_are_stored_again_as_text():
    study = make_study()
    question = make_question(study, text="Fetch ftp://example.org/file or https://example.org.")
    # As the code before 0017 stored it: the ftp URL linked.
    old = '<p>Fetch <a href="ftp://example.org/file">ftp://example.org/file</a> or https://example.org.</p>'
    Question.objects.filter(pk=question.pk).update(text_html=old, text_html_key="0" * 40)
    _migrate_across("0016_refresh_stored_renders", "0017_refresh_stored_renders_link_protocols")
    row = Question.objects.get(pk=question.pk)
    assert row.text_html_key == rendering.render_key(row.text)
    assert row.text_html.startswith('<p>Fetch ftp://example.org/file or <a href="https://example.org"')


@pytest.mark.django_db(transaction=True)
def test_answers_stored_before_0023_get_their_pieces_between_single_spaces():
    study = make_study()
    question = make_question(study, a1="One two\nthree.", a2="One  two.")
    first, second = question.answers.order_by("pk")
    # An answer imported with its lengths instead of its text: its pieces stay unknown.
    Answer.objects.filter(pk=second.pk).update(text="", len_words=40)
    _migrate_across("0022_markdown_validators", "0023_answer_len_spaces")
    assert Answer.objects.get(pk=first.pk).len_spaces == 2
    assert Answer.objects.get(pk=second.pk).len_spaces is None


def _run_id_foreign_keys() -> list:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "annotations_vote")
    return [c["foreign_key"] for c in constraints.values() if c["foreign_key"] and c["columns"] == ["run_id"]]


def _add_the_foreign_key_of_the_first_0002() -> None:
    """What a database that ran 0002 before it was rewritten has: a foreign key from a vote's
    run_id to judges.JudgeRun."""
    from django.db import models

    from annotations.models import Vote
    from judges.models import JudgeRun

    fk = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    fk.set_attributes_from_name("run")  # its column: run_id
    fk.model = Vote
    with connection.schema_editor() as editor:
        editor.alter_field(Vote, Vote._meta.get_field("run_id"), fk)


@pytest.mark.django_db(transaction=True)
def test_0026_drops_the_foreign_key_to_the_judges_app_that_older_databases_have_and_keeps_every_run():
    from django.db import IntegrityError, transaction

    from annotations.models import Vote
    from judges.services import judge_run_start
    from tests.factories import make_llm_judge, make_vote

    study = make_study()
    item = make_question(study).items.get()
    judge = make_llm_judge().judge
    run = judge_run_start(study=study, judge=judge, votes_per_item=1, enqueue=False)
    vote = make_vote(item, judge, run_id=run.pk)
    assert _run_id_foreign_keys() == [], "a database made now has none"
    _migrate_to("0025_study_protocol_defaults")
    try:
        _add_the_foreign_key_of_the_first_0002()
        assert _run_id_foreign_keys() == [("judges_judgerun", "id")]
    finally:
        _migrate_across("0026_answer_context", "0027_vote_run_id")
    assert _run_id_foreign_keys() == [], "a plain column the judges app interprets"
    assert Vote.objects.get(pk=vote.pk).run_id == run.pk and list(run.votes) == [vote]
    with pytest.raises(IntegrityError), transaction.atomic():  # still one vote per run, item and round
        make_vote(item, judge, run_id=run.pk)


@pytest.mark.django_db(transaction=True)
def test_admin_log_entries_of_drf_s_token_admin_no_longer_hold_keys():
    """DRF's token admin logged each token by its str, the key, shown under "Recent actions"."""
    from django.contrib.admin.models import ADDITION, LogEntry
    from django.contrib.contenttypes.models import ContentType
    from rest_framework.authtoken.models import Token, TokenProxy

    from tests.factories import make_staff

    owner = make_staff()
    key = Token.objects.create(user=owner).key
    executor = MigrationExecutor(connection)
    executor.migrate([("api", None)])
    proxy = ContentType.objects.get_for_model(TokenProxy, for_concrete_model=False)
    entry = LogEntry.objects.create(
        user=owner, content_type=proxy, object_id=str(owner.pk), object_repr=key, action_flag=ADDITION
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    entry.refresh_from_db()
    assert key not in entry.object_repr
