"""Django's database cache with an incr() that is atomic across processes.

The rater pages' rate limits (annotations/ratelimit.py) count in the default cache. Django's
database cache increments by reading and writing back, so two gunicorn workers counting the
same client at once could both store the same count. Here the increment holds the row's lock
(SELECT ... FOR UPDATE on PostgreSQL; on SQLite every transaction begins IMMEDIATE, which is
the write lock), so the count is exact with any number of workers and web hosts.
"""

from __future__ import annotations

from django.core.cache.backends.db import DatabaseCache
from django.db import connections, router, transaction


class AtomicDatabaseCache(DatabaseCache):
    def __init__(self, table: str, params: dict):
        super().__init__(table, params)
        self.table = table  # CACHES' LOCATION: the table's name

    def incr(self, key, delta=1, version=None):
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        with transaction.atomic(using=db):
            if connection.features.has_select_for_update:
                table = connection.ops.quote_name(self.table)
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"SELECT cache_key FROM {table} WHERE cache_key = %s FOR UPDATE",  # noqa: S608 - our table
                        [self.make_and_validate_key(key, version=version)],
                    )
            return super().incr(key, delta, version)
