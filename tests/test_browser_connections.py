"""A browser test leaves no database connection open behind it. While Playwright's sync API runs
its event loop in the test's thread, Django keeps that thread's connections apart (asgiref's
Local follows a running loop), so an ORM call in a `chromium()` block opens a connection of its
own; nothing closed it, and on PostgreSQL the test database could not be dropped at the end of
the run ("database test_biasstudy is being accessed by other users") and was left behind."""

import pytest
from django.db import connections

from annotations.models import Study
from tests.browser import chromium


@pytest.mark.browser
def test_a_connection_opened_while_the_browser_runs_is_closed_with_it(transactional_db):
    with chromium():
        Study.objects.exists()  # as make_staff() or a check inside a browser test does
        inside = connections["default"]
        assert inside.connection is not None
    assert inside is not connections["default"]  # the connection of the loop's context, not the test's
    # Django never closes an in-memory SQLite database (it would be gone): nothing to leave open there.
    assert inside.connection is None or inside.is_in_memory_db()
