"""import_votes --create: votes collected elsewhere need no empty study made by hand first."""

import pytest
from django.core.management import CommandError, call_command

from annotations.models import Study, Vote
from tests.factories import make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv


def test_it_creates_the_study_it_imports_into(db, tmp_path):
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command(
        "import_votes",
        str(path),
        "--format",
        "csv",
        "--study",
        "elsewhere",
        "--create",
        "--title",
        "From elsewhere",
        verbosity=0,
    )
    study = Study.objects.get(slug="elsewhere")
    assert study.title == "From elsewhere" and study.status == Study.Status.DRAFT
    assert Vote.objects.filter(item__study=study).count() == 4


def test_the_title_defaults_to_the_slug(db, tmp_path):
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command("import_votes", str(path), "--format", "csv", "--study", "plain", "--create", verbosity=0)
    assert Study.objects.get(slug="plain").title == "plain"


def test_an_existing_study_is_used_as_it_is(db, tmp_path):
    study = make_study(status="draft", slug="there", title="Already there")
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command(
        "import_votes", str(path), "--format", "csv", "--study", "there", "--create", "--title", "Ignored", verbosity=0
    )
    assert Study.objects.get(slug="there").title == "Already there"
    assert Vote.objects.filter(item__study=study).count() == 4


def test_without_create_a_missing_study_is_an_error_that_says_how(db, tmp_path):
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    with pytest.raises(CommandError, match="add --create"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "missing")


def test_a_failed_import_leaves_no_empty_study_behind(db, tmp_path):
    rows = [list(row) for row in GOOD_ROWS]
    rows[1][5] = "maybe"  # not a winner
    path = write_csv(tmp_path / "votes.csv", rows)
    with pytest.raises(CommandError, match="winner"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "fails", "--create")
    assert not Study.objects.filter(slug="fails").exists()


def test_a_slug_that_cannot_be_a_study_is_refused(db, tmp_path):
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    with pytest.raises(CommandError, match="cannot create study 'no spaces'"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "no spaces", "--create")
    assert not Study.objects.exists()
