"""What a caller decides when the fleet cannot answer: whether any chain worker is alive
(judged on Redis's clock), the failure policy's answer, the kinds a guard keeps closed, and
the gate that refuses while a stream holds its limit. Standard library only: the per-event
hook imports these too."""
