"""Supervised sessions (an agent in tmux, a supervising agent woken for it): the agent
registry, pane capture and the tmux driver."""
