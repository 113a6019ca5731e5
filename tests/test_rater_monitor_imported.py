"""People whose votes were imported are not crowd workers: the rater monitor and the payment
file are about raters who came through the study link; imported people are counted apart."""

from io import StringIO

from django.core.management import call_command
from django.urls import reverse

from analysis import exports, rater_monitor
from annotations.models import Rater
from tests.test_analysis_import import GOOD_ROWS, write_csv
from vote_imports import vote_import


def import_crowd_csv(study, tmp_path, rows=GOOD_ROWS):
    path = write_csv(tmp_path / "votes.csv", rows)
    out = StringIO()
    # Crowd votes collected elsewhere, added to a study that collects its own: said so.
    call_command("import_votes", str(path), "--format", "csv", "--study", study.slug, "--add-to-collecting", stdout=out)
    return out.getvalue()


def test_imported_people_are_not_in_the_monitor_or_the_payment_file(voted_study, tmp_path, staff_client):
    import_crowd_csv(voted_study.study, tmp_path)
    imported = set(Rater.objects.filter(study=voted_study.study).imported())
    assert {r.participant_id for r in imported} == {"p1", "p2"}
    assert list(Rater.objects.filter(study=voted_study.study).crowd()) == [voted_study.rater]

    monitor = rater_monitor.raters_monitor(study=voted_study.study)
    assert [r["rater"] for r in monitor] == [voted_study.rater]
    assert rater_monitor.imported_people(study=voted_study.study) == [{"judge": "crowd", "people": 2, "votes": 3}]
    payment = list(exports.payment_rows(voted_study.study))[1:]
    assert [row[0] for row in payment] == [voted_study.rater.participant_id]

    page = staff_client.get(reverse("analysis:raters", args=[voted_study.study.slug])).content.decode()
    assert "Imported people" in page and "did not come through the study link" in page
    assert "did not finish" not in page.split("Imported people")[1]


def test_a_study_of_imported_votes_only_has_an_empty_monitor_and_payment_file(small_study, tmp_path, staff_client):
    import_crowd_csv(small_study, tmp_path)
    assert rater_monitor.raters_monitor(study=small_study) == []
    assert list(exports.payment_rows(small_study)) == [exports.PAYMENT_COLUMNS]
    page = staff_client.get(reverse("analysis:raters", args=[small_study.slug])).content.decode()
    assert "No one has come through the study link yet." in page


def test_the_bloom_section_says_why_it_is_empty_when_votes_are_counted(small_study, tmp_path, staff_client):
    controls_only = [row for row in GOOD_ROWS if row[7] == ""]  # pairs as they came, as in MT-bench
    import_crowd_csv(small_study, tmp_path, controls_only)
    page = staff_client.get(reverse("analysis:study", args=[small_study.slug])).content.decode()
    assert "No counted votes." not in page
    assert "the counted votes here are all on control items" in page


def test_the_import_explains_unlinked_repeats(small_study, tmp_path):
    out = import_crowd_csv(small_study, tmp_path, [*GOOD_ROWS, GOOD_ROWS[0]])
    assert "1 repeats unlinked (a person's second vote on the same item" in out
    assert vote_import.votes_import_counts({"votes": 3, "repeats_unlinked": 0}) == [
        ("votes", 3, ""),
        ("repeats unlinked", 0, ""),
    ]
