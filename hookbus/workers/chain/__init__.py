"""The chain worker: reading requests, running the chain, answering, settling acks, leases and
crash recovery.
"""
