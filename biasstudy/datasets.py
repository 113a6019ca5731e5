"""Where the published data sets are (MT-bench, PRD, LLMBar, chen2024, ...), for the tests that
reproduce their figures and the benchmarks that import them.

The folder is the environment variable BIASSTUDY_DATASETS when it is set, else `shared/datasets`
beside the checkout (`../shared/datasets` from the repository root): never an absolute path
written in code, so a clone anywhere finds its data the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "BIASSTUDY_DATASETS"
REPOSITORY = Path(__file__).resolve().parent.parent
BESIDE_THE_CHECKOUT = REPOSITORY.parent / "shared" / "datasets"


def datasets_folder() -> Path:
    """The folder holding every data set: $BIASSTUDY_DATASETS, else ../shared/datasets."""
    named = os.environ.get(VARIABLE, "").strip()
    return Path(named).expanduser() if named else BESIDE_THE_CHECKOUT


def dataset_path(relative: str) -> Path:
    """A data set's folder or file, e.g. "prd_vicuna80_lfqa" or "llmbar/evaluator_votes.csv.gz"."""
    return datasets_folder() / relative


def missing_message(path: Path) -> str:
    """What to tell someone whose data set is not where it is looked for."""
    return (
        f"data set {path} is missing: put the shared data sets in {BESIDE_THE_CHECKOUT} "
        f"(../shared/datasets from the repository root) or name their folder in {VARIABLE}"
    )
