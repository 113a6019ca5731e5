"""Signals of the core app, for the apps built on it: the core imports none of them, they connect
their receivers in their AppConfig.ready()."""

from django.dispatch import Signal

# Sent with `study=<Study>` and `answers=[<Answer>, ...]` while a study file is imported
# (study_files.study_document_write: the import command, the admin's upload, the API and load_demo
# alike), once its rows are built and linked (a variant's derived_from, kind and question) but
# before any is written, outside the transaction. Receivers may fill in the answers' fields;
# what they set is inserted with the rows, all or nothing. The perturbations app stores the
# checks of the variants the file carried none for.
study_answers_prepared = Signal()
