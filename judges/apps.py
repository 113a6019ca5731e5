from collections.abc import Callable

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"

    def health_checks(self) -> dict[str, Callable[[], dict]]:
        """/health/'s checks of this app (biasstudy.health)."""
        from judges.health import judge_runs

        return {"judge_runs": judge_runs}
