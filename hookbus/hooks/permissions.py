"""What a hook may change on an event kind: its verdicts, the payload keys it may replace
(whole or key by key inside a table), added context and signals.

The catalogue says what each kind allows (:mod:`hookbus.bus.kinds`); a manifest's
``modify.allow_keys`` narrows that for one hook. Both are compiled into a
:class:`Permissions` when the hook is registered, and :func:`apply_updates` keeps what a
hook changed within them, noting every change it drops, so nothing is decided per call
from the catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookbus.bus.kinds import KindSpec


@dataclass(frozen=True, slots=True)
class Permissions:
    """What one hook may do to one event kind, compiled at registration.

    ``whole`` are payload keys the hook may replace; ``nested`` maps a payload key to the
    sub-keys it may change inside it.
    """

    kind: str
    verdicts: frozenset[str]
    whole: frozenset[str]
    nested: Mapping[str, frozenset[str]]
    modifiable: frozenset[str]
    context: bool
    signals: bool


def permissions(spec: KindSpec, allow_keys: list[str] | None) -> Permissions:
    """``allow_keys=None`` (code hooks) allows every key the catalogue allows."""
    whole: set[str] = set()
    nested: dict[str, set[str]] = {}
    if allow_keys is None:
        whole = set(spec.modifiable)
    else:
        for key in allow_keys:
            top, _, sub = key.partition(".")
            if not sub:
                if top in spec.modifiable:
                    whole.add(top)
                else:  # a bare nested key: inside every modifiable top-level key
                    for parent in spec.modifiable:
                        nested.setdefault(parent, set()).add(top)
            elif top in spec.modifiable:
                nested.setdefault(top, set()).add(sub)
    return Permissions(
        kind=spec.kind,
        verdicts=spec.verdicts,
        whole=frozenset(whole),
        nested={k: frozenset(v) for k, v in nested.items()},
        modifiable=spec.modifiable,
        context=spec.context,
        signals=spec.signals,
    )


def apply_updates(
    payload: Mapping[str, Any], updated: Mapping[str, Any], perms: Permissions, notes: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The new payload and the changes kept; every dropped change is described in ``notes``.

    Changes to a table (``tool_input``) merge into it key by key; keys cannot be removed.

    A nested change that equals the current value is not a change (Claude Code's
    ``updatedInput`` repeats the whole input), so it is neither applied nor noted.
    """
    new_payload = dict(payload)
    kept: dict[str, Any] = {}
    for key, value in updated.items():
        if key not in perms.modifiable:
            notes.append(f"dropped change to {key!r}: {perms.kind} does not allow changing it")
            continue
        current = payload.get(key)
        if key in perms.whole:
            if isinstance(value, Mapping) and isinstance(current, Mapping):
                value = {**current, **value}  # changes to a table merge into it
            new_payload[key] = value
            kept[key] = value
            continue
        allowed = perms.nested.get(key)
        if allowed is None or not isinstance(value, Mapping) or not isinstance(current, Mapping):
            notes.append(f"dropped change to {key!r}: not in this hook's modify.allow_keys")
            continue
        merged = dict(current)
        changed = False
        for sub, sub_value in value.items():
            if sub in current and current[sub] == sub_value:
                continue
            if sub in allowed:
                merged[sub] = sub_value
                changed = True
            else:
                notes.append(
                    f"dropped change to '{key}.{sub}': not in this hook's modify.allow_keys"
                )
        if changed:
            new_payload[key] = merged
            kept[key] = merged
    return new_payload, kept
