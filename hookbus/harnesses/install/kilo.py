"""``hookbus kilo install`` / ``uninstall``: OpenCode's plugin installer with Kilo CLI's folders.

Kilo CLI is a fork of OpenCode with the same plugin loader, so its installer is
:class:`hookbus.harnesses.install.opencode.PluginFile` for Kilo's row: the same plugin,
written to ``~/.config/kilo/plugin/hookbus.js`` or ``<repo>/.kilo/plugin/hookbus.js``, and
checked to load with Kilo's own runtime.
"""

from __future__ import annotations

from hookbus.harnesses.install.opencode import PluginFile
from hookbus.harnesses.kilo_adapter import ADAPTER

#: Kilo CLI's plugin file, install and uninstall.
PLUGIN = PluginFile(ADAPTER, label="Kilo CLI")
INSTALLER = PLUGIN.installer()
