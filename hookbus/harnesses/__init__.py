"""Adapters for agent CLIs (Claude Code first): the adapter table, the lean per-event
command path (no redis-py, typer, rich, pydantic, rq or msgspec) and its installers."""
