#!/bin/sh
# Reads the PreToolUse event (JSON) on stdin; exit 2 + reason on stderr denies the call.
# One grep over the whole event: a recursive rm aimed at /, ~, $HOME or *, mkfs, or dd
# writing a raw disk. Exit 0 with no output lets the call go on.
if grep -Eq '\brm[[:space:]]+(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)([[:space:]]+-[a-zA-Z-]+)*[[:space:]]+(/|~|\*|\$HOME)([[:space:]"]|/?\*?["[:space:]]|$)|\bmkfs(\.[a-z0-9]+)?\b|\bdd\b[^"]*\bof=/dev/(sd|nvme|hd|disk|mmcblk)'; then
    echo "refused: destructive command (recursive delete of /, ~ or *, mkfs, or a raw disk write); name the exact path or device" >&2
    exit 2
fi
exit 0
