"""Kilo CLI's row of the adapter table: OpenCode's implementation under Kilo's names.

Kilo CLI (npm ``@kilocode/cli`` 7.7.7) is a fork of OpenCode with the same plugin API, the
same hook points and the same answers (:mod:`hookbus.harnesses.opencode_adapter`); only its
folders differ: ``~/.config/kilo/`` for the user, ``<repo>/.kilo/`` for a project.
"""

from __future__ import annotations

from hookbus.harnesses.opencode_adapter import row

NAME = "kilo"

#: Plugin files per installer scope (user: ``$XDG_CONFIG_HOME/kilo``).
SETTINGS = {"user": "~/.config/kilo/plugin/hookbus.js", "project": ".kilo/plugin/hookbus.js"}

ADAPTER = row(NAME, label="Kilo CLI", binary="kilo", tried="7.7.7", settings=SETTINGS)
