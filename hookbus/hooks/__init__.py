"""Event catalogue, manifests, registry, conditions, actions, chain, audit, scaffolding."""
