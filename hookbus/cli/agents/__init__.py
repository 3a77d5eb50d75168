"""Commands for agent CLIs and supervised agents: per-CLI hooks and installers, the gateway, the
registry, tmux.
"""
