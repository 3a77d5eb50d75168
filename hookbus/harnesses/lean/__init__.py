"""The per-event hook command of agent CLIs: no redis-py, msgspec, pydantic or typer here."""
