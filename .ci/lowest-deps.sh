#!/usr/bin/env bash
# CI, lowest declared versions: a fresh venv where every runtime dependency is installed at
# exactly the floor pyproject.toml declares (`name>=X` becomes `name==X`, read from the file
# so the floors cannot drift from what is tested), the test extra resolved around them,
# then the unit tests (fakeredis; no Redis needed). A floor that does not work fails here.
# The `mcp` extra is left out (mcp>=2.0 itself needs pydantic>=2.12, so its path never runs
# at the floors; the normal CI tests it) and so is its one unit test file; so are the agent
# SDK extras (openai-agents needs pydantic>=2.12 and starlette>=1.3, claude-agent-sdk needs
# mcp), whose tests are integration tests the normal CI runs.
# Usage: .ci/lowest-deps.sh [VENV_DIR]   (default: a temporary folder, removed afterwards)
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${1:-}
if [ -z "$venv" ]; then
  venv=$(mktemp -d "${TMPDIR:-/tmp}/hookbus-lowest.XXXXXX")
  trap 'rm -rf "$venv"' EXIT
fi
constraints="$venv/lowest-constraints.txt"
test_reqs="$venv/lowest-test-requirements.txt"

python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
python3 - "$constraints" "$test_reqs" <<'PY'
import re
import sys
import tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
deps = project["dependencies"]
extras = project["optional-dependencies"]
#: extras whose packages need more than the runtime floors give
LEFT_OUT = ("mcp", "claude-agent-sdk", "openai-agents")


def name(req: str) -> str:
    return re.split(r"[\[<>=!~; ]", req.strip(), maxsplit=1)[0].lower()


left_out = {name(r) for extra in LEFT_OUT for r in extras[extra]}
with open(sys.argv[2], "w") as f:
    f.write("\n".join(r for r in extras["test"] if name(r) not in left_out) + "\n")
pins = []
for dep in deps:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?>=([^,;\s]+)", dep.strip())
    if match is None:
        sys.exit(f"lowest-deps: cannot read a floor from {dep!r} (write it as name>=X)")
    pins.append(f"{match.group(1)}=={match.group(3)}")
with open(sys.argv[1], "w") as f:
    f.write("\n".join(pins) + "\n")
PY
echo "== lowest declared versions:" $(cat "$constraints")
# -c pins the runtime floors; the test extra's own packages resolve around them
"$venv/bin/python" -m pip install --quiet -c "$constraints" -e . -r "$test_reqs"
"$venv/bin/python" -m pip freeze | grep -iE "^($(sed 's/==.*//' "$constraints" | paste -sd'|'))==" || true
echo "== unit tests on the lowest versions"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n auto tests/unit \
  --ignore=tests/unit/test_security_mcp_tools.py
