"""OpenTelemetry: the trace context an event carries, producer spans and worker spans."""
