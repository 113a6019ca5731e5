"""Admin pages on a big study: the chen2024 study, 1,000 raters and 100,000 votes on PostgreSQL.
Every registered model's list and its first object's page is fetched (the Django test client,
signed in as staff, in this process); each is timed over --repeat fetches and the median and
the number of queries are printed. The target: every page under 1 s.

    python bench/bench_admin_pages.py                 # needs PostgreSQL on 127.0.0.1:5432
    python bench/bench_admin_pages.py --raters 500 --votes-per-rater 100 --repeat 3
    python bench/bench_admin_pages.py --server postgres://user:pass@host:5432/postgres

A throw-away database is created on the server and dropped at the end. Seeding (study import,
raters and votes with bulk_create) is not timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from biasstudy.datasets import dataset_path  # noqa: E402

CHEN = dataset_path("humans_llms_judgement_bias")


def seed(raters: int, votes_per_rater: int):
    from annotations.models import Rater, Vote
    from annotations.study_files import study_import

    study = study_import(path=CHEN, fmt="chen2024", slug="chen-big")
    from annotations.models import Judge

    humans, _ = Judge.objects.get_or_create(study=study, kind=Judge.Kind.HUMAN, defaults={"name": "Humans"})
    items = list(study.items.filter(question__is_gold=False).values_list("pk", flat=True))
    assert votes_per_rater <= len(items), f"at most {len(items)} votes per rater (one per item)"
    people = Rater.objects.bulk_create(
        [Rater(study=study, participant_id=f"R{n:05d}", target=votes_per_rater) for n in range(raters)]
    )
    for n, rater in enumerate(people):
        Vote.objects.bulk_create(
            [
                Vote(
                    item_id=items[(n * 7 + k) % len(items)],
                    judge=humans,
                    rater=rater,
                    shown_first="a1" if k % 2 else "a2",
                    choice_shown="first",
                    choice="a1" if k % 2 else "a2",
                    client_ms=5000,
                )  # fmt: skip
                for k in range(votes_per_rater)
            ]
        )
    return study


def measure(repeat: int) -> list[dict]:
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", "bench@example.org", "x"))
    rows = []
    for model, model_admin in admin.site._registry.items():
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        listing = reverse(f"{prefix}_changelist")
        request = client.get(listing).wsgi_request
        first = model_admin.get_queryset(request).order_by("pk").first()
        urls = [(f"{model.__name__} list", listing)]
        if first is not None:
            urls.append((f"{model.__name__} #{first.pk}", reverse(f"{prefix}_change", args=[first.pk])))
        for name, url in urls:
            times = []
            for _ in range(repeat):
                with CaptureQueriesContext(connection) as queries:
                    started = time.perf_counter()
                    response = client.get(url)
                    times.append(time.perf_counter() - started)
                assert response.status_code == 200, f"{name}: {response.status_code}"
            rows.append({"page": name, "median_ms": round(1000 * statistics.median(times)), "queries": len(queries)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="postgres://biasstudy:biasstudy@127.0.0.1:5432/postgres")
    parser.add_argument("--raters", type=int, default=1000)
    parser.add_argument("--votes-per-rater", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import psycopg

    name = f"biasstudy_bench_admin_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        from bench.django_env import setup_django

        setup_django(urlunsplit(urlsplit(args.server)._replace(path=f"/{name}")), settings="biasstudy.settings")
        from django.db import connection
        from django.test.utils import override_settings, setup_test_environment

        setup_test_environment()
        started = time.perf_counter()
        study = seed(args.raters, args.votes_per_rater)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        seeded = time.perf_counter() - started
        # No collectstatic for a benchmark: pages name static files as they are.
        plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
        with override_settings(ALLOWED_HOSTS=["testserver"], STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}, "staticfiles": plain}):  # fmt: skip
            rows = measure(args.repeat)
        summary = {
            "study": study.slug,
            "raters": args.raters,
            "votes": args.raters * args.votes_per_rater,
            "seed_seconds": round(seeded, 1),
            "slowest_page": max(rows, key=lambda row: row["median_ms"]),
        }
        for row in rows:
            print(json.dumps(row))
        print(json.dumps(summary))
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(args.server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
