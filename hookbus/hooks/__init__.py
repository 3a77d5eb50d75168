"""Hooks as code: manifests, the loader, the registry, conditions, chain execution, results.

Actions live in :mod:`hookbus.hooks.actions`. The audit (:mod:`hookbus.audit`) and agent
self-authoring (:mod:`hookbus.authoring`) sit above this package and import it, never the
other way round.
"""
