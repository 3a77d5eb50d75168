"""Chain worker, fan-out dispatcher, RQ jobs and worker, reload listener, heartbeats."""
