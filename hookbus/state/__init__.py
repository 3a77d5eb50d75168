"""Fleet-wide state: limits, locks and escalation counters shared by every agent and worker,
and notices that reach every running session. Atomic in Redis (one script per check, on the
master of the key's own slot), measured on Redis's clock. Imports ``bus`` and ``bundles``.
"""
