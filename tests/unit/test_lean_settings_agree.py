"""The lean hook's settings reader and ``load_settings`` agree on every setting the lean path
uses, for random files and environments (hypothesis), and the table they share matches the
schema and the catalogue it copies from."""

from __future__ import annotations

import tempfile
import typing
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookbus import defaults
from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.bus.settings import table
from hookbus.bus.settings.loader import load_settings
from hookbus.bus.settings.schema import Settings
from hookbus.bus.settings.sections import Policy
from hookbus.errors import ConfigError
from hookbus.harnesses.adapters import ADAPTER_MODULES, adapter
from hookbus.harnesses.lean.config import load

#: Kind spellings a file or variable may use: canonical, other case and separators, the
#: catalogue's aliases and ``default``; sometimes an agent CLI's own event name, which may
#: be no kind the schema knows.
KNOWN_KINDS = sorted(
    {"default", "pre_tool_use", "PRETOOLUSE", "stop", "session-end"}
    | set(DEFAULT_CATALOGUE.kinds())
    | {
        alias
        for kind in DEFAULT_CATALOGUE.kinds()
        for alias in DEFAULT_CATALOGUE.resolve(kind).aliases
    }
)
CLI_NAMES = sorted({name for cli in ADAPTER_MODULES for name in adapter(cli).routes})
KIND_NAMES = st.tuples(
    st.integers(min_value=0, max_value=9), st.sampled_from(KNOWN_KINDS), st.sampled_from(CLI_NAMES)
).map(lambda drawn: drawn[2] if drawn[0] == 9 else drawn[1])


#: Mostly valid values (so that most examples load), sometimes one past a range or of
#: the wrong form (so that refusals are compared too).
ODD_INTS = st.sampled_from([-1, 0, 1, 2, 1024, 1025])
#: valid values of a field; the liveness pair apart, so that dead_after_ms stays above
#: heartbeat_interval_ms as the schema requires (mostly)
VALID = {
    "workers.heartbeat_interval_ms": st.integers(min_value=1, max_value=3000),
    "workers.dead_after_ms": st.integers(min_value=3001, max_value=10**6),
}


def mostly(valid: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` nine times in ten, ``odd`` the tenth (hypothesis favours small choices, so a
    plain ``one_of`` would draw the odd branch far more often)."""
    return st.tuples(st.integers(min_value=0, max_value=9), valid, odd).map(
        lambda drawn: drawn[2] if drawn[0] == 9 else drawn[1]
    )


def ints(field: table.Field) -> st.SearchStrategy[int]:
    valid = VALID.get(field.path)
    if valid is None:
        valid = st.integers(min_value=field.low or 1, max_value=field.high or 10**6)
    return mostly(valid, ODD_INTS)


def file_value(ints: st.SearchStrategy[int]) -> st.SearchStrategy[Any]:
    odd = st.one_of(st.booleans(), st.floats(allow_nan=False, allow_infinity=False))
    return mostly(ints, odd)


def env_value(ints: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    odd = st.sampled_from(["", "x", "1.5", " 7", "+3", "007", "-0"])
    return mostly(ints.map(str), odd)


DEADLINES = mostly(st.integers(min_value=1, max_value=10**5), ODD_INTS)
STRINGS = st.sampled_from(["ns-a", "redis://127.0.0.1:7000/0", "rediss://h:1/2", "ns-b", ""])


@st.composite
def layer(draw: st.DrawFn, *, env: bool) -> dict[str, Any]:
    """A file's data (a nested dict) or an environment (flat variables), lean fields only."""
    out: dict[str, Any] = {}
    value: Any
    for field in table.LEAN_FIELDS:
        if not draw(st.booleans()):
            continue
        if field.is_int:
            value = draw(env_value(ints(field)) if env else file_value(ints(field)))
        else:
            value = draw(STRINGS)
        if env:
            out[field.env] = value
        else:
            section, dot, name = field.path.partition(".")
            (out.setdefault(section, {}) if dot else out)[name or section] = value
    for name in table.LEAN_TABLES:
        kinds = draw(st.lists(KIND_NAMES, max_size=4, unique=True))
        for kind in kinds:
            if name == "deadlines":
                value = draw(env_value(DEADLINES) if env else file_value(DEADLINES))
            else:
                value = draw(mostly(st.sampled_from(["allow", "deny"]), st.just("maybe")))
            if env:
                out[table.env_var(f"{name}.{kind}")] = value
            else:
                out.setdefault(name, {})[kind] = value
    return out


def toml_text(data: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v + '"'
        return repr(v)

    def key(k: str) -> str:
        return '"' + k + '"'

    lines = [f"{key(k)} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, inner in data.items():
        if isinstance(inner, dict):
            lines.append(f"[{section}]")
            lines += [f"{key(k)} = {value(v)}" for k, v in inner.items()]
    return "\n".join(lines) + "\n"


def lean_view(cfg: Any) -> dict[str, Any]:
    return {
        "redis_url": cfg.redis_url,
        "namespace": cfg.namespace,
        "partitions": cfg.partitions,
        "streams.requests_maxlen": cfg.requests_maxlen,
        "streams.events_maxlen": cfg.events_maxlen,
        "streams.max_event_bytes": cfg.max_event_bytes,
        "workers.dead_after_ms": cfg.dead_after_ms,
    }


def full_view(s: Settings) -> dict[str, Any]:
    return {
        "redis_url": s.effective_redis_url,
        "namespace": s.namespace,
        "partitions": s.partitions,
        "streams.requests_maxlen": s.streams.requests_maxlen,
        "streams.events_maxlen": s.streams.events_maxlen,
        "streams.max_event_bytes": s.streams.max_event_bytes,
        "workers.dead_after_ms": s.workers.dead_after_ms,
    }


@pytest.mark.slow  # hundreds of generated cases
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer(env=False), layer(env=True))
def test_the_lean_reader_agrees_with_load_settings(
    file: dict[str, Any], env: dict[str, str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "hookbus.toml").write_text(toml_text(file))
        environ = {**env, "HOOKBUS_DEV_STATE": str(Path(folder) / "no-dev.json")}
        try:
            full = load_settings(environ=environ, cwd=Path(folder), warn=False).settings
        except ConfigError:
            full = None
        try:
            lean = load(environ, cwd=folder)
        except ConfigError:
            lean = None
    # the lean reader is never stricter, and where the schema accepts, it reads the same
    assert full is None or lean is not None, "the lean reader refused what load_settings took"
    if full is None or lean is None:
        return
    assert lean_view(lean) == full_view(full)
    for kind in DEFAULT_CATALOGUE.kinds():
        assert lean.deadline_ms(kind) == full.deadline_ms(kind), kind
        if lean.policy(kind) is not None:
            assert lean.policy(kind) == full.on_timeout_for(kind), kind


def test_the_lean_reader_is_as_strict_on_the_ranges_it_reads(tmp_path: Path) -> None:
    # each range the table states is the schema's: one past it is refused by both
    for field in table.LEAN_FIELDS:
        if not field.is_int:
            continue
        assert field.low is not None
        bad = [field.low - 1] + ([field.high + 1] if field.high is not None else [])
        for value in bad:
            environ = {field.env: str(value), "HOOKBUS_DEV_STATE": str(tmp_path / "x")}
            for which in ("full", "lean"):
                try:
                    if which == "full":
                        load_settings(environ=environ, cwd=tmp_path, warn=False)
                    else:
                        load(environ, cwd=str(tmp_path))
                except ConfigError:
                    continue
                raise AssertionError(f"{which}: {field.env}={value} was accepted")


def test_the_table_holds_the_schemas_defaults_and_policies() -> None:
    plain = msgspec.to_builtins(Settings())
    for field in table.LEAN_FIELDS:
        section, dot, name = field.path.partition(".")
        value = plain[section][name] if dot else plain[section]
        assert value == field.default, field.path
    assert typing.get_args(Policy) == table.POLICIES
    info = mi.type_info(Settings)
    assert isinstance(info, mi.StructType)
    names = {f.name for f in info.fields}
    assert set(table.LEAN_TABLES) <= names
    assert table.LEAN_FIELDS[0].default is None and defaults.DEFAULT_REDIS_URL


def test_the_alias_copy_is_the_catalogues() -> None:
    catalogue = {
        table.normalise(alias): table.normalise(spec.kind)
        for kind in DEFAULT_CATALOGUE.kinds()
        for spec in [DEFAULT_CATALOGUE.resolve(kind)]
        for alias in spec.aliases
        if table.normalise(alias) != table.normalise(spec.kind)
    }
    assert catalogue == table.KIND_ALIASES
