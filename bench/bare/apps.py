from django.apps import AppConfig


class BareConfig(AppConfig):
    name = "bench.bare"
    label = "bench_bare"
