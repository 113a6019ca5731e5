"""Settings for benchmarks: the product's settings plus the bare baseline app and its URLs."""

from biasstudy.settings import *  # noqa: F403
from biasstudy.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.bare"]
ROOT_URLCONF = "bench.bare.urls"

# Simulated raters vote at machine speed, far above what a person can: the limiter still runs on
# every vote (its cost is measured) but with a ceiling the benchmark never reaches.
RATER_VOTE_RATE = (10**9, 60)
RATER_ENTRY_RATE = (10**9, 60)
# Benchmarks run no collectstatic: pages name static files as they are (outside DEBUG the
# production storage would ask for its manifest).
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
