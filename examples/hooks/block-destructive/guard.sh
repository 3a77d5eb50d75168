#!/bin/sh
# Reads the PreToolUse event (JSON) on stdin; exit 2 + reason on stderr denies the call.
event=$(cat)

deny() {
    echo "$1" >&2
    exit 2
}

# A recursive rm aimed at the root, the home folder or everything.
if printf '%s' "$event" | grep -Eq '\brm[[:space:]]+(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)([[:space:]]+-[a-zA-Z-]+)*[[:space:]]+(/|~|\*|\$HOME)([[:space:]"]|/?\*?["[:space:]]|$)'; then
    deny "refused: recursive delete of /, ~ or * (name the exact path to delete)"
fi
# Formatting a file system or writing a raw block device.
if printf '%s' "$event" | grep -Eq '\bmkfs(\.[a-z0-9]+)?\b|\bdd\b[^"]*\bof=/dev/(sd|nvme|hd|disk|mmcblk)'; then
    deny "refused: formatting or overwriting a disk"
fi
exit 0
