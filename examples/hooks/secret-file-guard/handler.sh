#!/bin/sh
# BeforeToolCall guard: exit 1 with a reason on stderr blocks the call (MicroClaw contract).
if grep -Eq '(^|[/" ])(\.env(\.[a-z]+)?|id_rsa|id_ed25519|[a-z0-9_-]+\.pem)(["[:space:]]|$)'; then
    echo "refused: the call touches a secret file (.env, a private key)" >&2
    exit 1
fi
exit 0
