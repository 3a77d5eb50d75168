"""Fan-out: the dispatcher from the event log to RQ, the RQ jobs and the RQ worker."""
