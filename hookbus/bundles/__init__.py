"""Hook bundles: packing, checks, storage in Redis, signatures, the worker's cache, stamps and the
change history. Imports ``bus`` only.
"""
