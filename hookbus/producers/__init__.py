"""The producer SDK: :class:`~hookbus.producers.sync_client.HookBus` (sync) and
:class:`~hookbus.producers.async_client.AsyncHookBus` (asyncio), which share
:mod:`~hookbus.producers.client_base` (preparation, policy, reply checks) and
:mod:`~hookbus.producers.liveness`. Imports ``hookbus.bus`` only."""
