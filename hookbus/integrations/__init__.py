"""Hooks for Python agent SDKs: the fleet guards an agent written in code, not a CLI.

Each module is an optional extra whose SDK is imported only when the module is
(``pip install 'hookbus[claude-agent-sdk]'`` / ``'hookbus[openai-agents]'``):

* :mod:`hookbus.integrations.claude_agent_sdk`: ``hooks()`` for ``ClaudeAgentOptions(hooks=...)``;
* :mod:`hookbus.integrations.openai_agents`: ``tool_input_guardrail()`` and
  :class:`~hookbus.integrations.openai_agents.FleetRunHooks`.

Both ask the fleet through :class:`Fleet` on the SDK's own event loop and fail closed when
it cannot answer. ``Fleet`` needs neither SDK, so it is exported here.
"""

from hookbus.integrations.fleet import Fleet

__all__ = ["Fleet"]
