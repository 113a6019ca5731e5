"""Reading and writing whole studies: our own JSON format ("biasstudy", docs/STUDY_FORMAT.md)
and the files published with Chen et al. 2024 ("chen2024").

Every reader turns its input into one biasstudy document (a dict); `study_document_validate`
checks it completely before anything is written, and `study_import` writes it in a single
transaction. So a bad file fails as a whole, with a message naming file, line and field, and
leaves the database untouched.

Callers import from here; the modules below are, from the bottom up:
`problems` (StudyFileError, Problems: every problem of a file at once), `validate` (the
document's rules), `decode` (text, JSON and JSON Lines from a file that may be hostile),
`chen2024` (that format's reader), `read` (READERS and `study_file_read`: a file into a
validated document) and `write` (the document into the database, and a study back out).
"""

from annotations.study_files.chen2024 import CHEN_CONTROL_FILE, read_chen2024
from annotations.study_files.problems import MAX_PROBLEMS, Problems, StudyFileError
from annotations.study_files.read import READERS, read_biasstudy, study_file_read
from annotations.study_files.validate import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_DEPTH,
    STUDY_FIELDS,
    derive_items,
    first_unstorable,
    study_document_validate,
    validate_answer_record,
)
from annotations.study_files.write import study_document_write, study_export, study_import

__all__ = [
    "CHEN_CONTROL_FILE",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_DEPTH",
    "MAX_PROBLEMS",
    "READERS",
    "STUDY_FIELDS",
    "Problems",
    "StudyFileError",
    "derive_items",
    "first_unstorable",
    "read_biasstudy",
    "read_chen2024",
    "study_document_validate",
    "study_document_write",
    "study_export",
    "study_file_read",
    "study_import",
    "validate_answer_record",
]
