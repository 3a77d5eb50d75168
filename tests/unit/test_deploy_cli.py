"""Every hookbus command, flag and variable that deploy/ uses exists in the real CLI: the
containers' arguments (Kubernetes, compose), systemd's ExecStart for each role, the
commands its comments tell an operator to run, and every HOOKBUS_* variable it sets."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hookbus.bus.settings.env import OTHER_VARIABLES, setting_variables
from tests.cli_syntax_helpers import check_command_line, check_inline, inline_commands

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
FILES = sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.suffix != ".json")
#: A comment line that is a command to run: ``#   [VAR=value ...] hookbus ...``.
COMMENT_COMMAND = re.compile(r"^\s*#\s+((?:[A-Z_]+=\S+\s+)*hookbus\s.*)$")
VARIABLE = re.compile(r"\bHOOKBUS_[A-Z0-9_]*[A-Z0-9]\b")


def container_commands() -> list[tuple[str, list[str]]]:
    """(where, args) of every hookbus container in the Kubernetes and compose files."""
    found: list[tuple[str, list[str]]] = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "Deployment":
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    found.append((f"{path.name}:{container['name']}", container["args"]))
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        if "build" in service:  # the hookbus image (ENTRYPOINT ["hookbus"])
            found.append((f"docker-compose.yml:{name}", service["command"]))
    return found


def comment_commands() -> list[tuple[str, str]]:
    """(where, command) of each command deploy/'s comments and READMEs tell one to run."""
    found: list[tuple[str, str]] = []
    for path in FILES:
        text = path.read_text().replace("\\\n#", " ")  # a continued comment line
        for number, line in enumerate(text.splitlines(), start=1):
            where = f"{path.relative_to(DEPLOY)}:{number}"
            match = COMMENT_COMMAND.match(line)
            if match:
                found.append((where, match.group(1).split("#")[0].strip()))
            found.extend((where, command) for command in inline_commands(line))
    return found


def test_the_dockerfile_runs_hookbus() -> None:
    assert 'ENTRYPOINT ["hookbus"]' in (DEPLOY / "Dockerfile").read_text()


@pytest.mark.parametrize(("where", "args"), container_commands(), ids=lambda v: str(v)[:40])
def test_each_container_s_arguments_parse_against_the_cli(where: str, args: list[str]) -> None:
    assert check_command_line(list(args)) is None, (where, check_command_line(list(args)))


@pytest.mark.parametrize("role", ["chain", "fanout", "rq"])
def test_the_systemd_unit_starts_each_role(role: str) -> None:
    unit = (DEPLOY / "systemd" / "hookbus-worker@.service").read_text()
    (start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    words = start.removeprefix("ExecStart=").replace("%i", role).split()
    assert words[0].endswith("/hookbus")
    assert check_command_line(words[1:]) is None, check_command_line(words[1:])


def test_there_are_commands_in_the_comments() -> None:
    assert len(comment_commands()) >= 8


@pytest.mark.parametrize(("where", "command"), comment_commands(), ids=lambda v: str(v)[:40])
def test_each_command_deploy_tells_an_operator_to_run_parses(where: str, command: str) -> None:
    words = command.split()
    while words and "=" in words[0]:
        words = words[1:]
    assert check_inline(" ".join(words)) is None, (where, check_inline(" ".join(words)))


def test_every_hookbus_variable_in_deploy_is_one_hookbus_reads() -> None:
    known = set(setting_variables()) | OTHER_VARIABLES
    used: dict[str, str] = {}
    for path in FILES:
        for name in VARIABLE.findall(path.read_text()):
            used.setdefault(name, str(path.relative_to(DEPLOY)))
    assert used, "no HOOKBUS_* variable found in deploy/"
    unknown = {name: where for name, where in used.items() if name not in known}
    assert unknown == {}


def _keda_rule(text: str) -> set[str]:
    """The permissions of the KEDA user's ACL rule, from ``+xinfo`` to the end of the quote
    (a README's closing backquote, a manifest comment's ``(one line)``)."""
    start = text.index("+xinfo")
    rule = re.split(r"`|\(one line\)", text[start:], maxsplit=1)[0].replace("#", " ")
    return {w for w in rule.split() if w.startswith(("+", "%R~"))}


def test_the_keda_acl_rule_is_the_same_wherever_it_is_written() -> None:
    in_manifest = _keda_rule((DEPLOY / "kubernetes" / "chain-worker.yaml").read_text())
    assert {"+xinfo", "+llen", "%R~rq:queue:hookbus-default"} <= in_manifest
    assert _keda_rule((DEPLOY / "redis" / "README.md").read_text()) == in_manifest


def test_compose_publishes_redis_on_a_port_of_its_own_not_the_host_s_6379() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    published = [port.split(":")[-2] for port in compose["services"]["redis"].get("ports", [])]
    assert "6379" not in published


def _unit_text() -> str:
    return (DEPLOY / "systemd" / "hookbus-worker@.service").read_text()


def test_systemd_analyze_verifies_the_unit_once_its_command_is_installed(tmp_path: Path) -> None:
    start = re.search(r"^ExecStart=(\S+)", _unit_text(), re.MULTILINE)
    assert start is not None
    # the installed command stands in for /opt/hookbus/bin/hookbus, which install.sh makes
    command = Path(sys.executable).parent / "hookbus"
    unit = tmp_path / "hookbus-worker@chain.service"
    unit.write_text(_unit_text().replace(start.group(1), str(command)))
    verified = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verified.returncode == 0, verified.stderr
    assert "hookbus-worker" not in verified.stderr, verified.stderr


def test_install_sh_makes_every_path_the_unit_relies_on() -> None:
    script = (DEPLOY / "systemd" / "install.sh").read_text()
    unit = _unit_text()
    start = re.search(r"^ExecStart=(\S+)/bin/hookbus", unit, re.MULTILINE)
    assert start is not None
    assert f'prefix="${{INSTALL_PREFIX:-{start.group(1)}}}"' in script
    for key in ("ReadWritePaths", "WorkingDirectory"):
        (path,) = re.findall(rf"^{key}=(\S+)", unit, re.MULTILINE)
        assert path in script, key
    (cache,) = re.findall(r"^Environment=XDG_CACHE_HOME=(\S+)", unit, re.MULTILINE)
    assert cache in script
    assert re.search(r"^User=hookbus$", unit, re.MULTILINE)
    assert "useradd --system" in script and " hookbus\n" in script
    syntax = subprocess.run(["bash", "-n", str(DEPLOY / "systemd" / "install.sh")])
    assert syntax.returncode == 0
