"""The published data sets in tests: `pytest.mark.dataset("prd_vicuna80_lfqa", ...)` on a test
or module, checked by conftest's `pytest_runtest_setup` through `require`."""

from __future__ import annotations

import os

import pytest

from biasstudy.datasets import dataset_path, missing_message


def require(*relative: str) -> None:
    """Go on only if every named data set is there (biasstudy.datasets says where). Locally a
    missing one skips the test, naming the path and the variable; in CI (CI set, as .ci/run is
    run) it fails: there it is a broken set-up, and a reproduction that skipped would pass
    without reproducing anything."""
    for name in relative:
        path = dataset_path(name)
        if path.exists():
            continue
        if os.environ.get("CI"):
            pytest.fail(f"{missing_message(path)} (CI is set: a missing data set fails the run)", pytrace=False)
        pytest.skip(missing_message(path))
