"""What ``hookbus hooks create``, ``enable`` and ``disable`` do: the hand edits of a hooks
folder (the commands themselves, their options and help, are in
:mod:`hookbus.cli.hooks.manage`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
from rich.markup import escape

from hookbus.bus.ids import agent_id_from
from hookbus.cli.hooks.manage import _catalogue, _dir
from hookbus.cli.support import console, fail, print_json, state, want_json
from hookbus.hooks.manifest import load_manifest
from hookbus.hooks.manifest_model import AGENT_PREFIX


def create(
    ctx: typer.Context,
    name: str,
    event: str,
    action: str,
    priority: int,
    hooks_dir: Path | None,
    json_flag: bool,
) -> None:
    """Scaffold the hook (refusing an action kind with no scaffold) and say how to try it."""
    from hookbus.authoring.scaffold import SCAFFOLD_ACTIONS, create_hook

    if action not in SCAFFOLD_ACTIONS:
        fail(f"--action must be one of {', '.join(SCAFFOLD_ACTIONS)}, got {action!r}", 2)
    folder = _dir(ctx, hooks_dir)
    try:
        manifest_path = create_hook(
            folder,
            name,
            event,
            action=action,
            priority=priority,
            catalogue=_catalogue(ctx),
            deadline_ms=state(ctx).local_settings().deadline_ms,
        )
    except OSError as exc:
        fail(f"cannot create hook {name!r} in {folder}: {exc.strerror or exc}")
    files = sorted(str(p) for p in manifest_path.parent.iterdir())
    if want_json(ctx, json_flag):
        print_json({"name": name, "manifest": str(manifest_path), "files": files})
        return
    console.print(f"[green]created[/] {escape(str(manifest_path.parent))}", highlight=False)
    for file in files:
        console.print(f"  {file}", highlight=False, markup=False)
    sample = json.dumps({"kind": event, "payload": {}})
    console.print(
        f"try it: echo '{sample}' | hookbus hooks run {name} --hooks-dir {folder} --event -",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def flip(
    ctx: typer.Context, name: str, hooks_dir: Path | None, enabled: bool, json_flag: bool
) -> None:
    """What ``hooks enable`` / ``disable`` do: set ``enabled`` in the hook's manifest,
    keeping its comments; an agent may flip only the hooks it wrote."""
    from hookbus.authoring.manifest_edit import find_manifest, set_enabled

    folder = _dir(ctx, hooks_dir)
    catalogue = _catalogue(ctx)
    path = find_manifest(folder, name, catalogue=catalogue)
    agent = agent_id_from(os.environ)
    if agent:  # run from an agent's session: it may flip only the hooks it wrote
        author = load_manifest(path, catalogue=catalogue).author
        if author != f"{AGENT_PREFIX}{agent.removeprefix(AGENT_PREFIX)}":
            fail(
                f"{name} was written by {author}: an agent (HOOKBUS_AGENT_ID={agent}) may "
                "enable or disable only hooks it wrote; ask an operator"
            )
    manifest = set_enabled(path, enabled, catalogue=catalogue)
    word = "enabled" if enabled else "disabled"
    if want_json(ctx, json_flag):
        print_json({"name": manifest.name, "enabled": manifest.enabled, "manifest": str(path)})
        return
    console.print(
        f"{word} {manifest.name} ({path}); run `hookbus reload` to apply it to running workers",
        highlight=False,
        markup=False,
    )
