"""Result contracts: what a hook may answer, in four dialects (what the event kind lets it
change is :mod:`hookbus.hooks.permissions`).

A hook (python return value, shell stdout JSON, HTTP body) may answer in:

* hookbus's own form: ``outcome`` (continue|deny|ask|halt), ``reason``, ``updated``,
  ``context`` (a string or a list), ``signals``, ``logs``;
* Claude Code's form: ``decision: "block"|"approve"``, ``reason``, ``continue: false`` with
  ``stopReason`` (halt), ``hookSpecificOutput.permissionDecision`` (allow|deny|ask),
  ``permissionDecisionReason``, ``updatedInput``, ``additionalContext``;
* the signal form: ``hook_signals`` (an ``ability_guard`` signal with code
  ``ABILITY_DENIED`` denies, or asks when its payload says ``require_human``), ``logs``,
  ``error: {code, message}`` (a hook error, so ``on_error`` applies);
* MicroClaw's form: ``{"action": "allow"|"block"|"modify", "reason", "updated"|"arguments"}``.

When one answer says several things the strongest wins: halt > deny > ask > allow.
Unknown keys are ignored (a newer hook may send more). Anything that is not a mapping, or
whose known keys have the wrong type, is an error of the hook, never a crash of the chain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from hookbus.bus.wire import HookResult, HookSignal
from hookbus.errors import HookExecutionError

#: The answer of a hook that has nothing to say. Shared: never mutate it.
CONTINUE = HookResult()

#: Precedence of outcomes when one answer carries several.
STRENGTH = {"continue": 0, "ask": 1, "deny": 2, "halt": 3}

_OUTCOME_WORDS = {
    "continue": "continue",
    "allow": "continue",
    "approve": "continue",
    "ok": "continue",
    "deny": "deny",
    "block": "deny",
    "ask": "ask",
    "halt": "halt",
    "stop": "halt",
}
_SEVERITY_WORDS = {
    "info": "info",
    "low": "low",
    "warning": "medium",
    "warn": "medium",
    "medium": "medium",
    "error": "high",
    "high": "high",
    "critical": "critical",
}


class _Invalid(Exception):
    pass


def _outcome(value: Any, where: str, out: _Builder) -> str:
    """The canonical outcome of a verdict word. An unknown word stops the chain as a deny
    (anything but continue short-circuits, and failing closed is the safe reading of a
    word we do not know) and is noted in the logs; a non-string is invalid."""
    if not isinstance(value, str):
        raise _Invalid(f"{where} must be one of continue, allow, deny, ask, halt; got {value!r}")
    word = _OUTCOME_WORDS.get(value.lower())
    if word is None:
        out.logs.append(f"unknown {where} {value!r} treated as deny")
        return "deny"
    return word


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _Invalid(f"{where} must be a string or a list of strings")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _Invalid(f"{where} must be an object")
    return dict(value)


def _signal(value: Any) -> HookSignal:
    if isinstance(value, HookSignal):
        return value
    if not isinstance(value, Mapping) or not isinstance(value.get("kind"), str):
        raise _Invalid("each signal must be an object with a string 'kind'")
    code = value.get("code")
    severity = _SEVERITY_WORDS.get(str(value.get("severity", "info")).lower(), "info")
    payload = value.get("payload") or {}
    if not isinstance(payload, Mapping):
        payload = {"value": payload}
    return HookSignal(
        kind=value["kind"],
        code=str(code) if code is not None else None,
        severity=severity,  # type: ignore[arg-type]
        payload=dict(payload),
    )


class _Builder:
    """Collects what the dialects say, keeping the strongest outcome and its reason."""

    __slots__ = ("context", "logs", "outcome", "reason", "signals", "updated")

    def __init__(self) -> None:
        self.outcome = "continue"
        self.reason: str | None = None
        self.updated: dict[str, Any] = {}
        self.context: list[str] = []
        self.signals: list[HookSignal] = []
        self.logs: list[str] = []

    def say(self, outcome: str, reason: Any = None) -> None:
        if reason is not None and not isinstance(reason, str):
            reason = str(reason)
        if STRENGTH[outcome] > STRENGTH[self.outcome]:
            self.outcome = outcome
            self.reason = reason or self.reason
        elif self.reason is None and reason and outcome == self.outcome:
            self.reason = reason

    def build(self) -> HookResult:
        if (
            self.outcome == "continue"
            and self.reason is None
            and not (self.updated or self.context or self.signals or self.logs)
        ):
            return CONTINUE
        return HookResult(
            outcome=self.outcome,  # type: ignore[arg-type]
            reason=self.reason,
            updated=self.updated,
            context=self.context,
            signals=self.signals,
            logs=self.logs,
        )


def _hookbus_form(data: Mapping[str, Any], out: _Builder) -> None:
    if "outcome" in data:
        out.say(_outcome(data["outcome"], "outcome", out), data.get("reason"))
    elif isinstance(data.get("reason"), str) and "decision" not in data and "action" not in data:
        out.reason = data["reason"]
    if "updated" in data and data["updated"] is not None:
        out.updated.update(_mapping(data["updated"], "updated"))
    if "context" in data and data["context"] is not None:
        out.context.extend(_strings(data["context"], "context"))
    if "signals" in data and data["signals"] is not None:
        if not isinstance(data["signals"], list):
            raise _Invalid("signals must be a list")
        out.signals.extend(_signal(s) for s in data["signals"])
    if "logs" in data and data["logs"] is not None:
        out.logs.extend(_strings(data["logs"], "logs"))


def _claude_form(data: Mapping[str, Any], out: _Builder) -> None:
    decision = data.get("decision")
    if decision is not None:
        out.say(_outcome(decision, "decision", out), data.get("reason"))
    if data.get("continue") is False:
        out.say("halt", data.get("stopReason") or data.get("reason"))
    if isinstance(data.get("systemMessage"), str):
        out.logs.append(data["systemMessage"])
    specific = data.get("hookSpecificOutput")
    if specific is None:
        return
    specific = _mapping(specific, "hookSpecificOutput")
    permission = specific.get("permissionDecision")
    if permission is not None and permission != "defer":
        out.say(
            _outcome(permission, "permissionDecision", out),
            specific.get("permissionDecisionReason"),
        )
    nested = specific.get("decision")
    if isinstance(nested, Mapping):  # PermissionRequest: {"behavior": "allow"|"deny", ...}
        behavior = nested.get("behavior")
        if behavior is not None:
            out.say(_outcome(behavior, "decision.behavior", out), nested.get("message"))
        if nested.get("updatedInput") is not None:
            out.updated["tool_input"] = _mapping(nested["updatedInput"], "updatedInput")
    if specific.get("updatedInput") is not None:
        out.updated["tool_input"] = _mapping(specific["updatedInput"], "updatedInput")
    if specific.get("additionalContext") is not None:
        out.context.extend(_strings(specific["additionalContext"], "additionalContext"))


def _seed001_form(data: Mapping[str, Any], hook_id: str, out: _Builder) -> None:
    error = data.get("error")
    if error:
        if isinstance(error, Mapping):
            code = error.get("code")
            message = error.get("message") or "no message"
            text = f"{code}: {message}" if code else str(message)
        else:
            text = str(error)
        raise HookExecutionError(hook_id, f"hook reported an error: {text}")
    signals = data.get("hook_signals")
    if signals is None:
        return
    if not isinstance(signals, list):
        raise _Invalid("hook_signals must be a list")
    for raw in signals:
        signal = _signal(raw)
        out.signals.append(signal)
        if signal.kind == "ability_guard" and signal.code == "ABILITY_DENIED":
            reason = signal.payload.get("reason")
            out.say("ask" if signal.payload.get("require_human") else "deny", reason)


def _microclaw_form(data: Mapping[str, Any], out: _Builder) -> None:
    action = data.get("action")
    if not isinstance(action, str):
        return
    word = action.lower()
    if word == "modify":
        for key in ("arguments", "args"):
            if data.get(key) is not None:
                out.updated["tool_input"] = _mapping(data[key], key)
        for key in ("hint", "append_hint"):
            if data.get(key) is not None:
                out.context.extend(_strings(data[key], key))
        return
    out.say(_outcome(word, "action", out), data.get("reason"))


def coerce_result(raw: object, hook_id: str) -> HookResult:
    """Turn whatever a hook answered into a :class:`HookResult`; raises
    :class:`HookExecutionError` for an answer in no accepted form."""
    if raw is None:
        return CONTINUE
    if type(raw) is HookResult:
        return raw
    if isinstance(raw, msgspec.Struct):
        raw = msgspec.to_builtins(raw)
    if not isinstance(raw, Mapping):
        raise HookExecutionError(
            hook_id,
            f"returned {type(raw).__name__}; return a HookResult, a dict in an accepted form "
            "or None (see docs/hooks.md)",
        )
    out = _Builder()
    try:
        _hookbus_form(raw, out)
        _claude_form(raw, out)
        _seed001_form(raw, hook_id, out)
        _microclaw_form(raw, out)
    except _Invalid as exc:
        raise HookExecutionError(hook_id, f"invalid result: {exc}") from None
    return out.build()
