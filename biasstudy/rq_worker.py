"""The worker of the Redis queue: RQ's own, with its maintenance every few seconds instead of
every 10 minutes. settings.RQ names it, so every `manage.py rqworker` runs it.

A judge run's watchdog (judges.tasks.watch_run) is a deferred job, and only RQ's scheduler
enqueues deferred jobs; it runs beside the one worker that holds the queue's scheduler lock.
When that worker dies with its scheduler (SIGKILL, out of memory, a host gone), the lock lapses
61 s after its last heartbeat, but another worker only tries to take it in its maintenance,
which RQ runs every 10 minutes, and an idle worker looks again only after a blocking wait for a
job of up to worker_ttl - 15 s (405 s by default). Until then no watchdog runs and the dead
worker's judge run stays "running". The same maintenance fails the jobs of dead workers and
cleans the other registries; it takes a lock per queue, so several workers do not repeat it,
and costs a few Redis commands.

Here every worker runs its maintenance every MAINTENANCE_SECONDS and never waits for a job
longer than that, so a surviving (or newly started) worker takes the lapsed lock within about
MAINTENANCE_SECONDS, and the run is resumed about 70 s after the kill (with the default
JUDGE_RUN_STALE_SECONDS; tests/test_reliability_judge_worker.py). A worker busy with a job does
its maintenance once the job ends, as in RQ; it could not run the resumed run meanwhile anyway.
"""

from __future__ import annotations

from rq import Worker as RQWorker

MAINTENANCE_SECONDS = 10


class Worker(RQWorker):
    def __init__(self, *args, maintenance_interval: int = MAINTENANCE_SECONDS, **kwargs) -> None:
        super().__init__(*args, maintenance_interval=maintenance_interval, **kwargs)

    @property
    def dequeue_timeout(self) -> int:
        # RQ waits worker_ttl - 15 s for a job and runs maintenance only between waits.
        return max(1, min(super().dequeue_timeout, self.maintenance_interval))
