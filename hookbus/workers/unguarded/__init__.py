"""Tool calls that ran with no guard asked: how the fleet notices that an agent's guard
silently stopped running.

An agent CLI whose hook was removed by hand, whose settings file it rejected, or whose old
version ignores the installer's ``onFailure`` runs its tools without asking anyone, and no
CLI reports it. Every adapter sends the tool's PostToolUse all the same, so the fleet can
tell: a chain worker that answers a PreToolUse leaves a mark naming the call
(:mod:`~hookbus.workers.unguarded.marks`); the fan-out dispatcher that reads a PostToolUse
looks, a moment later, for its mark (:mod:`~hookbus.workers.unguarded.watch`); a call with
none is recorded, counted and shown by ``hookbus status``, ``/metrics`` and the console
(:mod:`~hookbus.workers.unguarded.report`).
"""
