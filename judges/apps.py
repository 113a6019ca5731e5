from collections.abc import Callable

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"

    def ready(self) -> None:
        from judges import data_version  # the models are ready now

        data_version.connect()

    def health_checks(self) -> dict[str, Callable[[], dict]]:
        """/health/'s checks of this app (biasstudy.health)."""
        from judges.health import judge_runs

        return {"judge_runs": judge_runs}

    def health_busy_workers(self) -> bool:
        """Whether a worker is busy with a judge run (its tasks may wait behind it: /health/)."""
        from judges.health import busy_with_a_run

        return busy_with_a_run()
