"""The approval inbox: requests a hook answered ``ask`` for, parked until an operator decides.

A hook whose ``[approval] route = "operator"`` (or the fleet's ``approvals.route``) answers
``ask``: the chain worker parks the request (:mod:`~hookbus.approvals.model` says what is
stored, ``park.lua`` does it atomically with the request's XACK) and the producer keeps
waiting. An operator decides once, from ``hookbus approvals``, the console or its API, all
through :class:`~hookbus.approvals.inbox.ApprovalInbox`; the decision goes straight to the
waiting producer's reply key, the decision log and the hash-chained change history. Nobody
deciding within ``wait_s``: a sweeper (every chain worker runs one, and so does every reader
of the inbox) answers with the event's failure policy, degraded.

Parked requests live in Redis alone, in their partition's hash slot beside the reply key they
answer: a chain worker that dies changes nothing for them.

This package sits on ``bus`` (and ``bundles`` for the history, ``hooks.actions`` for the
notification's guarded egress); workers and the console import it, never the reverse.
"""
