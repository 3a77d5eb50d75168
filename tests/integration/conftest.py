"""Fixtures shared by several integration test modules (pytest finds them here, so no test
module imports them): a scripted chain worker for the Claude Code hook (``fleet``), the HTTP
gateway (``gateway``), and the real Gemini CLI, Codex and Cline binaries with a chain worker of
their guard hooks (``gemini_bin``, ``codex_bin``, ``cline_bin``, ``chain_worker``)."""

from tests.agent_cli_helpers import chain_worker, cline_bin, codex_bin, gemini_bin
from tests.claude_code_helpers import fleet, gateway

__all__ = ["chain_worker", "cline_bin", "codex_bin", "fleet", "gateway", "gemini_bin"]
