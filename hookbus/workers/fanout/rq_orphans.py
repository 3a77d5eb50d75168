"""Jobs orphaned between dequeue and start: run them again within seconds, retries intact.

RQ dequeues with BLMOVE from the queue into an intermediate list and moves the job into
its StartedJobRegistry a moment later. A worker killed in between leaves the job in the
intermediate list, where stock RQ finds it after a minute and *fails* it: a hook with no
retries goes to the dead letters without ever having run. Here a maintenance pass that
finds a job still there :data:`ORPHAN_AFTER_S` after it first saw it puts the job back at
the head of its queue, unfailed (it never ran, so no retry is spent): it runs again within
about ten seconds of its worker's death.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from rq.intermediate_queue import IntermediateQueue
from rq.utils import now

if TYPE_CHECKING:
    from rq.queue import Queue
    from rq.worker.base import BaseWorker

log = logging.getLogger(__name__)

#: How long a job may sit between dequeue and start before it counts as orphaned, in s.
#: A live worker moves it on within milliseconds.
ORPHAN_AFTER_S = 5


class HookIntermediateQueue(IntermediateQueue):
    """RQ's intermediate list, with orphans requeued instead of failed."""

    def should_be_cleaned_up(self, job_id: str) -> bool:
        first_seen = self.get_first_seen(job_id)
        if not first_seen:
            return False
        return bool(now() - first_seen > timedelta(seconds=ORPHAN_AFTER_S))

    def cleanup(self, worker: BaseWorker, queue: Queue) -> None:
        """Requeue the jobs that were dequeued and never started (runs under RQ's
        maintenance lock, so one worker at a time)."""
        for job_id in self.get_job_ids():
            if job_id in queue.started_job_registry:
                continue
            if queue.fetch_job(job_id) is None:
                self.remove(job_id)
                continue
            if self.set_first_seen(job_id) or not self.should_be_cleaned_up(job_id):
                continue
            if self.connection.lrem(self.key, 1, job_id):
                queue.push_job_id(job_id, at_front=True)
                log.warning(
                    "job %s was dequeued by a worker that died before starting it; requeued",
                    job_id,
                )
            self.connection.delete(self.get_first_seen_key(job_id))
