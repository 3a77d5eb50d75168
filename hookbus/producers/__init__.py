"""The client SDK (sync and asyncio), `hookbus publish`, the Claude Code adapter."""
