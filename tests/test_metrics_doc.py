"""docs/STATISTICS.md's metric list is the registry's: the test fails, naming the command that
rewrites it, while the page is out of date."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from analysis import metrics_doc
from analysis.management.commands.metrics_doc import statistics_page
from analysis.rows import FIGURES


def test_the_metric_list_of_statistics_md_is_the_registrys():
    text = statistics_page().read_text(encoding="utf-8")
    assert metrics_doc.rewritten(text) == text, f"docs/STATISTICS.md is out of date: run {metrics_doc.COMMAND}"


def test_the_list_names_every_declared_figure_once_with_its_label():
    block = metrics_doc.metric_list()
    for f in FIGURES.values():
        assert block.count(f"| `{f.metric}` | {f.label} |") == 1, f.metric


def test_the_check_fails_on_a_stale_page_naming_the_command(tmp_path, settings):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "STATISTICS.md"
    page.write_text(f"# Statistics\n\n{metrics_doc.START}\nold list\n{metrics_doc.END}\n", encoding="utf-8")
    settings.BASE_DIR = tmp_path
    with pytest.raises(CommandError, match="out of date: run python manage.py metrics_doc --write"):
        call_command("metrics_doc", "--check")
    call_command("metrics_doc", "--write", stdout=StringIO())
    assert "old list" not in page.read_text(encoding="utf-8")
    call_command("metrics_doc", "--check")


def test_a_page_without_its_markers_is_an_error_naming_them():
    with pytest.raises(ValueError, match="<!-- metrics:start --> to <!-- metrics:end -->"):
        metrics_doc.rewritten("# Statistics\n")
