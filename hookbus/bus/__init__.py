"""Redis connection, key names, wire types, request/reply, event log, bundles, embedded server."""
