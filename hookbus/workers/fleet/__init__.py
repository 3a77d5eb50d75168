"""What every worker role shares: heartbeats, status, backlog, metrics, dead letters, signals,
restarts.
"""
