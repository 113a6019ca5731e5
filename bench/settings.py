"""Settings for benchmarks: the product's settings plus the bare baseline app and its URLs."""

from biasstudy.settings import *  # noqa: F403
from biasstudy.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.bare"]
ROOT_URLCONF = "bench.bare.urls"
