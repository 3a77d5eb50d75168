"""Supervised sessions (seed 003): the agent registry, pane capture and the tmux driver."""
