"""Following reloads: the hook set a worker serves, its health, and the acks a reload waits for."""
