"""Every model change has its migration: a new choice, field or option that ``makemigrations``
would write and nobody did fails here, not only in the pre-commit hook (a choice changes no
table, so every other test passes without it)."""

import io

import pytest
from django.core.management import call_command


def test_every_model_change_has_its_migration(db):
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out)
    except SystemExit:
        pytest.fail(f"a model change has no migration (python manage.py makemigrations):\n{out.getvalue()}")
