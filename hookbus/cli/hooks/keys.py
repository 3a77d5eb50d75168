"""``hookbus keys``: the Ed25519 key pair that signs hook bundles.

``hookbus keys generate --out DIR`` writes ``DIR/signing.key`` (mode 0600; give it to
whoever runs ``hookbus reload``, as ``$HOOKBUS_SIGNING_KEY_FILE``) and ``DIR/verify.key``
(give it to every worker, as ``$HOOKBUS_VERIFY_KEY_FILE``). The library side is
:mod:`hookbus.bundles.signing`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookbus.cli.support import console, print_json, want_json

app = typer.Typer(help="Keys that sign hook bundles.", no_args_is_help=True)


@app.command("generate")
def generate(
    ctx: typer.Context,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to write signing.key and verify.key to.")
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing pair (re-key every worker).")
    ] = False,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Create a signing key pair for bundles (Ed25519)."""
    from hookbus.bundles.signing import SIGNING_KEY_ENV, VERIFY_KEY_ENV, generate_keys

    paths = generate_keys(out, overwrite=force)
    if want_json(ctx, json_flag):
        print_json(
            {
                "signing_key": str(paths.signing),
                "verify_key": str(paths.verify),
                "key_id": paths.key_id,
            }
        )
        return
    console.print(f"wrote {paths.signing} (private, mode 0600) and {paths.verify}", markup=False)
    console.print(f"key id {paths.key_id}", markup=False)
    console.print(
        f"  hookbus reload: export {SIGNING_KEY_ENV}={paths.signing}\n"
        f"  every worker:   export {VERIFY_KEY_ENV}={paths.verify}",
        markup=False,
    )
