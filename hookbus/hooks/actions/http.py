"""HTTP actions: the event JSON sent to a URL; a 2xx JSON body is the hook's answer.

Header values may reference environment variables as ``${NAME}`` (checked at registration):
an operator's hook may name variables in the security env allow-list or its own
``requires.env``; an agent-written hook only those the operator declared in
``security.http_header_env``, so it cannot send the worker's secrets anywhere. An
agent-written hook also connects through the guarded client of
:mod:`hookbus.hooks.actions.egress`: only public addresses, checked when dialled. An empty
2xx body (or 204) means continue; any other status, a non-JSON body or a transport error is
an error of the hook, so its ``on_error`` decides. Redirects are not followed.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

from hookbus import defaults
from hookbus.bus.wire import encode_json
from hookbus.errors import HookExecutionError, HookRegistrationError, HookTimeout
from hookbus.hooks.actions.models import HttpAction

if TYPE_CHECKING:
    import httpx

    from hookbus.hooks.manifest_model import HookManifest
    from hookbus.hooks.registry import HookRegistry

#: A ``${NAME}`` reference in a header value.
HEADER_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BODY_PREVIEW_CHARS = 200


class HttpCall:
    """A compiled http action."""

    def __init__(
        self,
        hook_id: str,
        *,
        url: str,
        method: str,
        headers: dict[str, str],
        registry: HookRegistry,
        guarded: bool = False,
        max_response_bytes: int = defaults.DEFAULT_OUTPUT_CAP_BYTES,
    ) -> None:
        self.hook_id = hook_id
        self.max_response_bytes = max_response_bytes
        self.guarded = guarded
        self.url = url
        self.method = method
        self.headers = headers
        self.registry = registry

    @classmethod
    def from_manifest(cls, manifest: HookManifest, *, registry: HookRegistry) -> HttpCall:
        spec = manifest.action.spec
        assert isinstance(spec, HttpAction)
        agent = manifest.agent_authored
        if agent:
            allowed = set(registry.egress.header_env)
            why = "not in security.http_header_env (an agent-written hook may send only those)"
        else:
            allowed = set(registry.env_allowlist) | set(manifest.requires.env)
            why = "in neither security.env_allowlist nor requires.env: add it to requires.env"
        for name, value in spec.headers.items():
            for var in HEADER_VARIABLE.findall(value):
                if var not in allowed:
                    message = f"header {name!r} references ${{{var}}}, which is {why}"
                    raise HookRegistrationError(manifest.name, message)
        return cls(
            manifest.name,
            url=spec.url,
            method=spec.method,
            headers=dict(spec.headers),
            registry=registry,
            guarded=agent,
            max_response_bytes=spec.max_response_bytes,
        )

    def _headers(self) -> dict[str, str]:
        def expand(match: re.Match[str]) -> str:
            value = os.environ.get(match.group(1))
            if value is None:
                raise HookExecutionError(
                    self.hook_id, f"environment variable {match.group(1)} is not set"
                )
            return value

        headers = {k: HEADER_VARIABLE.sub(expand, v) for k, v in self.headers.items()}
        headers.setdefault("content-type", "application/json")
        headers.setdefault("user-agent", "hookbus")
        return headers

    def __call__(self, arg: Any, timeout: float | None, under_deadline: bool = False) -> Any:
        import httpx

        client: httpx.Client = self.registry.http_client(guarded=self.guarded)
        try:
            # streamed, so an endpoint that answers megabytes costs at most the cap
            with client.stream(
                self.method,
                self.url,
                content=encode_json(arg),
                headers=self._headers(),
                timeout=timeout,
            ) as response:
                body = self._read_capped(response)
        except httpx.TimeoutException:
            raise HookTimeout(
                self.hook_id, f"{self.url} did not answer within {timeout}s"
            ) from None
        except httpx.HTTPError as exc:
            raise HookExecutionError(
                self.hook_id, f"{self.method} {self.url} failed: {type(exc).__name__}: {exc}"
            ) from None
        if not 200 <= response.status_code < 300:
            preview = body[:_BODY_PREVIEW_CHARS].decode("utf-8", "replace")
            raise HookExecutionError(
                self.hook_id, f"{self.url} answered HTTP {response.status_code}: {preview!r}"
            )
        if not body.strip():
            return None
        try:
            return json.loads(body)
        except ValueError:
            preview = body[:_BODY_PREVIEW_CHARS].decode("utf-8", "replace")
            raise HookExecutionError(
                self.hook_id, f"{self.url} answered a body that is not JSON: {preview!r}"
            ) from None

    def _read_capped(self, response: httpx.Response) -> bytes:
        """The body, or an error once it passes ``max_response_bytes`` (not read further)."""
        cap = self.max_response_bytes
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > cap and 200 <= response.status_code < 300:
                raise HookExecutionError(
                    self.hook_id,
                    f"{self.url} answered more than {cap} bytes (max_response_bytes); "
                    "not read further",
                )
            if size <= cap + _BODY_PREVIEW_CHARS:
                chunks.append(chunk)
            else:
                break  # an error status: its preview is all that is kept
        return b"".join(chunks)
