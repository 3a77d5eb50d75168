"""Python actions: ``entrypoint = "module:function"`` called in-process.

Import: the module is looked up in the hook's folder first. A ``<folder>/<module>.py`` is
loaded from its file under a name unique to its folder and content (so two hooks may both
have a ``handler.py``, and two versions of one never share a module); a dotted module or a
package in the folder is imported by name. While the folder's code is imported the folder is
on ``sys.path`` (so the handler can import its siblings), and only then: ``sys.path`` is left
as it was. Before a folder is imported, the modules of earlier hook folders with the same
names are dropped from ``sys.modules``, so a reload runs the new code of a package or of a
sibling, not the cached one. Siblings are imported at the module's top
(a sibling first imported inside a function, at call time, is not found). A folder whose
``.py`` files are unchanged (same place, same bytes) is imported once. Anything else is
imported from the normal import path.

Concurrency: a call on a hook thread whose caller gave up at its timeout is *abandoned* and
keeps its thread until the hook returns. Each hook may have at most its cap
(:data:`HOOK_ABANDONED_CAP`) of those; past it the hook is not started: its run fails at once
with :class:`~hookbus.errors.HookBusy` (a timeout: its ``on_error`` answers, the decision is
flagged degraded) instead of taking yet another thread, so one hanging hook holds at most
its cap of threads and the other hooks keep theirs. Calls whose caller still waits are not
capped (the worker's chain concurrency bounds them). :func:`hooks_at_cap` tells heartbeats
which hooks are at their cap now.

Timeouts: a sync function is called inline (no thread hand-off) unless it may need to be
abandoned: with ``isolate = true``, or, when ``isolate`` is unset, when the request has a
deadline. Then it runs on a daemon worker thread and is abandoned with
:class:`~hookbus.errors.HookTimeout` at min(its timeout, time left): Python cannot stop a
thread, so **an abandoned call keeps running in the background** until it returns (its
answer is discarded). An inline call that overruns its timeout is noticed when it returns
and also counts as a timeout. Async functions run on a per-thread event loop under
``asyncio.wait_for``, which does cancel them.

Agents: an in-process action runs inside the worker, with its memory, secrets and network,
where nothing can confine it. So an agent-written one (``author = "agent:<id>"``) is never
imported (importing runs its code) unless the operator sets
``security.allow_unconfined_agent_hooks``; each run is refused instead, and the hook's
``on_error`` answers. Agents' python runs as script hooks (``python3 handler.py``), confined
like shell hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from types import ModuleType
from typing import Any

from hookbus.errors import HookExecutionError, HookRegistrationError, HookTimeout
from hookbus.hooks.actions.confine import agent_refusal
from hookbus.hooks.actions.hook_threads import (
    HOOK_ABANDONED_CAP,
    abandon,
    hooks_at_cap,
    start_call,
)

__all__ = [
    "HOOK_ABANDONED_CAP",
    "HookExecutionError",
    "PythonCall",
    "check_signature",
    "hooks_at_cap",
    "python_call",
    "resolve_entrypoint",
]

logger = logging.getLogger(__name__)

_import_lock = threading.RLock()
#: (folder, module) -> (folder content digest, module): an unchanged folder is imported
#: once; a changed one (or a new bundle folder) is imported afresh, the old entry dropped.
_module_cache: dict[tuple[str, str], tuple[str, ModuleType]] = {}
#: Folders hook code was imported from: a cached module whose file lies under one of them
#: is hook code, dropped from ``sys.modules`` before a folder using the same name imports.
_hook_roots: set[str] = set()


def _folder_digest(folder: Path) -> str:
    """A digest of every ``.py`` file under ``folder`` (names and bytes): what decides
    whether the folder's code changed. Modification times are not trusted (a bundle
    unpacked twice, a copy keeping them)."""
    digest = hashlib.sha1(str(folder).encode())
    for path in sorted(folder.rglob("*.py")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:  # unreadable: the import will say why
            continue
    return digest.hexdigest()


def _local_names(folder: Path) -> set[str]:
    """Top-level module names the folder provides (``x.py``, package folders)."""
    names: set[str] = set()
    for child in folder.iterdir():
        if child.suffix == ".py":
            names.add(child.stem)
        elif child.is_dir():
            names.add(child.name)
    return names


def _under_hook_root(module: ModuleType) -> bool:
    file = getattr(module, "__file__", None)
    if not file:  # a namespace package: judge by its path
        paths = list(getattr(module, "__path__", []) or [])
        file = paths[0] if paths else None
    if not file:
        return False
    return any(file.startswith(root + "/") for root in _hook_roots)


def _forget_removed_folders() -> None:
    """Drop the modules and cache entries of hook folders that are gone from disk (old
    bundle versions the cache cleaned up), so reloads do not pile up modules in memory."""
    gone = {root for root in _hook_roots if not os.path.isdir(root)}
    if not gone:
        return
    _hook_roots.difference_update(gone)
    for key in [k for k in _module_cache if k[0] in gone]:
        del _module_cache[key]
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if any(file.startswith(root + "/") for root in gone):
            del sys.modules[name]


def _forget_hook_modules(names: set[str]) -> None:
    """Drop from ``sys.modules`` the hook modules (from any hook folder) named like one of
    ``names``, so the folder about to be imported gets its own code, not the previous
    bundle's. Modules already imported keep the objects they hold."""
    for name in list(sys.modules):
        if name.split(".")[0] in names:
            module = sys.modules.get(name)
            if module is not None and _under_hook_root(module):
                del sys.modules[name]


def resolve_entrypoint(hook_id: str, entrypoint: str, folder: Path | None) -> Callable[..., Any]:
    """Import ``module:function`` (folder first) and return the function; raises
    :class:`HookRegistrationError` naming the hook when it cannot."""
    module_name, _, func_name = entrypoint.partition(":")
    if not module_name or not func_name:
        raise HookRegistrationError(hook_id, f"entrypoint {entrypoint!r}: use 'module:function'")
    with _import_lock:
        try:
            module = _import(module_name, folder)
        except HookRegistrationError:
            raise
        except (Exception, SystemExit) as exc:  # a module calling sys.exit() at import
            raise HookRegistrationError(
                hook_id,
                f"cannot import {module_name!r} for entrypoint {entrypoint!r}: "
                f"{type(exc).__name__}: {exc}",
            ) from exc
    fn = getattr(module, func_name, None)
    if fn is None or not callable(fn):
        raise HookRegistrationError(
            hook_id,
            f"{module_name!r} ({getattr(module, '__file__', '?')}) has no function {func_name!r}",
        )
    return fn  # type: ignore[no-any-return]


def _import(module_name: str, folder: Path | None) -> ModuleType:
    if folder is None:
        return importlib.import_module(module_name)
    folder = folder.resolve()
    file = folder / f"{module_name}.py"
    single = "." not in module_name and file.is_file()
    top = module_name.split(".")[0]
    if not single and not ((folder / top).is_dir() or (folder / f"{top}.py").is_file()):
        return importlib.import_module(module_name)  # not the folder's: the normal path
    digest = _folder_digest(folder)
    key = (str(folder), module_name)
    cached = _module_cache.get(key)
    if cached is not None and cached[0] == digest:
        return cached[1]
    _forget_removed_folders()
    _forget_hook_modules(_local_names(folder))
    _hook_roots.add(str(folder))
    # the folder is on sys.path only while its code is imported: a reload leaves sys.path
    # as it was, and siblings imported at module level stay bound to the module
    entry = str(folder)
    importlib.invalidate_caches()  # a folder written since the last import
    sys.path.insert(0, entry)
    try:
        if single:
            module = _exec_file(file, module_name, digest)
        else:
            module = importlib.import_module(module_name)
    finally:
        with contextlib.suppress(ValueError):  # unless the module took it out itself
            sys.path.remove(entry)
        sys.path_importer_cache.pop(entry, None)
    _module_cache[key] = (digest, module)
    return module


def _exec_file(file: Path, module_name: str, digest: str) -> ModuleType:
    """``<folder>/<module>.py`` under a name unique to its folder and content, so two hooks'
    ``handler.py`` and two versions of one never share a module."""
    unique = f"_hookbus_hook_{digest[:12]}_{module_name}"
    spec = importlib.util.spec_from_file_location(unique, file)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py always has one
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(unique, None)
        raise
    return module


def check_signature(hook_id: str, fn: Callable[..., Any]) -> None:
    """A hook function must accept exactly one positional argument (the event)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: trust them
        return
    try:
        signature.bind(object())
    except TypeError:
        raise HookRegistrationError(
            hook_id,
            f"{getattr(fn, '__qualname__', fn)!r} must accept exactly one argument "
            f"(the event); its signature is {signature}",
        ) from None


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


_loops = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _loops.loop = loop
    return loop


def _run_coroutine(coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
    awaitable = asyncio.wait_for(coro, timeout) if timeout is not None else coro
    return _loop().run_until_complete(awaitable)


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class PythonCall:
    """A compiled python action: ``call(arg, timeout)`` returns the function's answer."""

    __slots__ = ("cap", "fn", "hook_id", "is_async", "isolate")

    def __init__(
        self,
        hook_id: str,
        fn: Callable[..., Any],
        *,
        isolate: bool | None,
        cap: int | None = None,
    ) -> None:
        self.hook_id = hook_id
        self.fn = fn
        self.is_async = is_async(fn)
        self.isolate = isolate
        #: most of this hook's abandoned calls still running (see the module doc);
        #: None: :data:`HOOK_ABANDONED_CAP`
        self.cap = cap

    def __call__(self, arg: Any, timeout: float | None, under_deadline: bool = False) -> Any:
        if self.is_async:
            return self._call_async(arg, timeout)
        threaded = timeout is not None and (
            self.isolate is True or (self.isolate is None and under_deadline)
        )
        if not threaded:
            started = time.perf_counter()
            result = self.fn(arg)
            if timeout is not None and time.perf_counter() - started > timeout:
                raise HookTimeout(self.hook_id, f"took longer than its {timeout:.3g}s timeout")
            return result
        assert timeout is not None
        fn = self.fn
        future, call = start_call(self.hook_id, self.cap, lambda: fn(arg))
        try:
            return future.result(timeout)
        except FutureTimeout:
            abandon(call)
            raise HookTimeout(
                self.hook_id,
                f"did not return within {timeout:.3g}s (abandoned; the call "
                "keeps running in a background thread)",
            ) from None

    def _call_async(self, arg: Any, timeout: float | None) -> Any:
        if _in_running_loop():  # called from async code: give the coroutine its own loop
            fn = self.fn
            future, call = start_call(
                self.hook_id, self.cap, lambda: _run_coroutine(fn(arg), timeout)
            )
            try:
                return future.result(None if timeout is None else timeout + 1.0)
            except (TimeoutError, FutureTimeout):
                abandon(call)
                raise HookTimeout(self.hook_id, f"did not finish within {timeout:.3g}s") from None
        try:
            return _run_coroutine(self.fn(arg), timeout)
        except TimeoutError:
            raise HookTimeout(self.hook_id, f"did not finish within {timeout:.3g}s") from None


def _refusing(hook_id: str, reason: str) -> Callable[[Any], Any]:
    """A stand-in for a hook that may not run: every call raises (logged once at WARNING)."""
    calls = 0

    def refuse(event: Any) -> Any:
        nonlocal calls
        calls += 1
        log = logger.warning if calls == 1 else logger.debug
        log("%s (run %d refused; its on_error answers)", reason, calls)
        raise HookExecutionError(hook_id, reason)

    return refuse


def python_call(
    hook_id: str,
    entrypoint: str,
    folder: Path | None,
    *,
    isolate: bool | None,
    agent: bool = False,
    allow_unconfined: bool = False,
) -> PythonCall:
    """Compile a python action; an agent-written one is refused without being imported
    unless ``allow_unconfined`` (``security.allow_unconfined_agent_hooks``)."""
    if agent and not allow_unconfined:
        reason = agent_refusal(hook_id, in_process=True)
        assert reason is not None
        return PythonCall(hook_id, _refusing(hook_id, reason), isolate=False)
    fn = resolve_entrypoint(hook_id, entrypoint, folder)
    check_signature(hook_id, fn)
    return PythonCall(hook_id, fn, isolate=isolate)
