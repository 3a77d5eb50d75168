"""Installers: hookbus's hook entries merged into (and taken out of) each agent CLI's settings."""
