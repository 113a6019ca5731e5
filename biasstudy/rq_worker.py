"""The worker of the Redis queue: RQ's own, with its maintenance every few seconds instead of
every 10 minutes, and a loop that outlives Redis going away. RQ's worker retries with backoff while it waits for a job, but a Redis error
while it runs one ends its loop: the heartbeats it sends meanwhile, or the bookkeeping when the
job ends, raise, and the worker logs "found an unhandled exception, quitting" and exits: no later
job runs until someone restarts it. Here the heartbeats sent while a job runs are skipped while
Redis is away (the job, whose work is in the database, goes on), and when the bookkeeping of a
finished job meets no Redis the worker waits for Redis (backoff up to REDIS_WAIT_MOST_SECONDS
between tries) and then takes jobs again, in the same process
(tests/test_reliability_judge_worker.py). The bookkeeping is lost (with Redis restarted empty, so
is the job; with it persisted, RQ's maintenance moves the job on from its started registry); the
judge run is in the database and the watchdog looks after it. A Redis error elsewhere in the loop
still ends the process, as in RQ; docs/DEPLOY.md's unit restarts it.
"""

from __future__ import annotations

import signal
import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Worker as RQWorker
from rq.exceptions import StopRequested

MAINTENANCE_SECONDS = 10
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)
# Waiting for Redis to come back: the first try after this long, doubling up to the most.
REDIS_WAIT_SECONDS = 0.5
REDIS_WAIT_MOST_SECONDS = 30.0


class Worker(RQWorker):
    def __init__(self, *args, maintenance_interval: int = MAINTENANCE_SECONDS, **kwargs) -> None:
        super().__init__(*args, maintenance_interval=maintenance_interval, **kwargs)

    @property
    def dequeue_timeout(self) -> int:
        # RQ waits worker_ttl - 15 s for a job and runs maintenance only between waits.
        return max(1, min(super().dequeue_timeout, self.maintenance_interval))

    def maintain_heartbeats(self, job, execution) -> None:
        """The heartbeats sent while the work-horse runs a job. With Redis away they are skipped:
        raising here would end the worker while its horse still runs the job."""
        try:
            super().maintain_heartbeats(job, execution)
        except REDIS_DOWN as exc:
            self.log.warning("Worker %s: job %s goes on; its heartbeat could not be sent (%s)", self.name, job.id, exc)

    def execute_job(self, job, queue) -> None:
        try:
            super().execute_job(job, queue)
        except REDIS_DOWN as exc:
            self.log.warning("Worker %s: job %s ended while Redis was away (%s)", self.name, job.id, exc)
            if self.horse_pid:  # raised before the horse ended (a signal meanwhile): let it finish
                self.wait_for_horse()
            self._wait_for_redis()
            self.log.warning("Worker %s: Redis answers again; taking jobs again", self.name)

    def _wait_for_redis(self) -> None:
        """Return once Redis answers; StopRequested if the worker is asked to stop meanwhile (RQ's
        own signal handlers ask Redis for the worker's state, so they are set aside)."""
        stop: list[int] = []
        handlers = {
            sig: signal.signal(sig, lambda signum, _: stop.append(signum)) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        pause = REDIS_WAIT_SECONDS
        try:
            while not stop:
                try:
                    self.connection.ping()
                    return
                except REDIS_DOWN as exc:
                    self.log.warning("Worker %s: Redis does not answer (%s); again in %.1f s", self.name, exc, pause)
                until = time.monotonic() + pause
                while not stop and time.monotonic() < until:  # a signal does not cut a sleep short
                    time.sleep(0.2)
                pause = min(2 * pause, REDIS_WAIT_MOST_SECONDS)
            self.log.info("Worker %s: stopping on request while Redis is away", self.name)
            raise StopRequested
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
