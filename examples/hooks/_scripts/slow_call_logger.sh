#!/bin/sh
# Appends the event (one JSON line) to hookbus-slow-calls.log in the temp dir.
log="${TMPDIR:-/tmp}/hookbus-slow-calls.log"
cat >> "$log"
echo >> "$log"
exit 0
