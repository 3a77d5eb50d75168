"""Commands that run and watch the fleet: worker, dev, demo, status, reload, tail, dlq, replay."""
