"""``hookbus keys generate``: a private signing key and a verify key that work together."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hookbus.bundles import signing
from hookbus.cli.hooks import keys as keys_cli
from hookbus.errors import ConfigError

app = typer.Typer()
app.add_typer(keys_cli.app, name="keys")


def test_generate_writes_a_0600_signing_key_and_a_verify_key_that_checks_its_signatures(
    tmp_path: Path,
) -> None:
    out = CliRunner().invoke(app, ["keys", "generate", "--out", str(tmp_path / "k"), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    private = Path(data["signing_key"])
    public = Path(data["verify_key"])
    assert private == tmp_path / "k" / "signing.key"
    assert public == tmp_path / "k" / "verify.key"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    sig = signing.sign(signing.load_signing_key(private), "ns", "ab" * 32)
    verify_key = signing.load_verify_key(public)
    assert signing.check_signature(verify_key, "ns", "ab" * 32, sig, version="v") is True
    assert signing.key_id(verify_key) == data["key_id"]


def test_generate_refuses_to_overwrite_an_existing_pair_without_force(tmp_path: Path) -> None:
    first = signing.generate_keys(tmp_path)
    with pytest.raises(ConfigError, match="already exists"):
        signing.generate_keys(tmp_path)
    assert signing.key_id(signing.load_verify_key(first.verify)) == first.key_id
    again = signing.generate_keys(tmp_path, overwrite=True)
    assert again.signing.is_file()
