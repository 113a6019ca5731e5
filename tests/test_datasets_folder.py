"""Where the tests and benchmarks find the published data sets: $BIASSTUDY_DATASETS, else
../shared/datasets from the repository root; a missing one skips a test locally, naming the path
and the variable, and fails it in CI."""

import re
from pathlib import Path

import pytest

from biasstudy import datasets
from tests.datasets import require

REPOSITORY = Path(__file__).resolve().parent.parent


def test_without_the_variable_the_data_sets_are_beside_the_checkout(monkeypatch):
    monkeypatch.delenv("BIASSTUDY_DATASETS", raising=False)
    assert datasets.datasets_folder() == REPOSITORY.parent / "shared" / "datasets"
    assert (
        datasets.dataset_path("llmbar/README.md") == REPOSITORY.parent / "shared" / "datasets" / "llmbar" / "README.md"
    )


def test_the_variable_names_the_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("BIASSTUDY_DATASETS", str(tmp_path))
    assert datasets.dataset_path("prd_vicuna80_lfqa") == tmp_path / "prd_vicuna80_lfqa"


def test_a_data_set_that_is_there_lets_the_test_go_on(monkeypatch, tmp_path):
    monkeypatch.setenv("BIASSTUDY_DATASETS", str(tmp_path))
    monkeypatch.setenv("CI", "1")
    (tmp_path / "mtbench_human_judgments").mkdir()
    require("mtbench_human_judgments")


def test_locally_a_missing_data_set_skips_naming_the_path_and_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("BIASSTUDY_DATASETS", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require("llmbar/evaluator_votes.csv.gz")
    assert str(tmp_path / "llmbar" / "evaluator_votes.csv.gz") in str(skipped.value)
    assert "BIASSTUDY_DATASETS" in str(skipped.value) and "../shared/datasets" in str(skipped.value)


def test_in_ci_a_missing_data_set_fails_the_run(monkeypatch, tmp_path):
    monkeypatch.setenv("BIASSTUDY_DATASETS", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    (tmp_path / "prd_vicuna80_lfqa").mkdir()
    with pytest.raises(pytest.fail.Exception, match="mtbench_human_judgments is missing"):
        require("prd_vicuna80_lfqa", "mtbench_human_judgments")


def test_no_test_or_benchmark_names_a_machine_path_for_the_data_sets():
    absolute = re.compile(r"[\"']/\S*/(shared|datasets)\b")  # a quoted absolute path to shared/ or datasets/
    for folder in ("tests", "bench"):
        for source in (REPOSITORY / folder).rglob("*.py"):
            assert not absolute.search(source.read_text(encoding="utf-8")), source
