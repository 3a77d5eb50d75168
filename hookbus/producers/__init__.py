"""The producer SDK: :class:`~hookbus.producers.sync_client.HookBus` (sync) and
:class:`~hookbus.producers.async_client.AsyncHookBus` (asyncio), which share
:mod:`~hookbus.producers.client_base` (preparation, policy, reply checks) and
the liveness check of :mod:`hookbus.bus.policy.liveness`. Imports ``hookbus.bus`` only."""
