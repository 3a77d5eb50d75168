"""Shell actions: a command with the event as JSON on stdin.

The contract: exit 0 and no output → continue; exit 0 and JSON on stdout → a result (any
accepted dialect, see :mod:`hookbus.hooks.results`); exit 2 → deny with stderr as the
reason; a code listed in the manifest's ``exit_codes`` → that outcome (MicroClaw hooks map
1 to deny); anything else → an error, so the hook's ``on_error`` decides.

Safety:

* no shell unless the manifest sets ``shell = true``: the command is split with ``shlex``;
  a first word with a ``/`` is resolved against the hook folder, and ``python`` /
  ``python3`` mean this interpreter (``sys.executable``; a PATH lookup can find a slow shim);
* the process runs in its own session and, where the kernel allows, as the first process
  of its own PID namespace (:mod:`hookbus.hooks.actions.confine`): at the timeout the whole
  process group is killed (SIGKILL), and when the run ends the namespace dies with it, so a
  hook leaves no process behind, ``setsid`` and double forks included;
* the worker is non-dumpable and the hook holds no capability over it, so it cannot read
  the worker's secrets from ``/proc/<worker>/environ``; an agent-written hook runs in the
  bubblewrap sandbox (:mod:`hookbus.hooks.actions.sandbox`: its own namespaces, a read-only
  runtime, its folder at ``/hook``, an environment from scratch, resource limits, as
  ``nobody`` for a root worker), and where that sandbox cannot be built it is refused at
  each run (its ``on_error`` answers) unless the operator sets
  ``security.allow_unconfined_agent_hooks``;
* stdout and stderr are read in chunks and stored up to ``max_output_bytes`` each (64 KiB
  default); the rest is read and discarded so the child never blocks on a full pipe (the
  worker's memory stays bounded whatever the hook prints), stdout over the cap makes the
  run an error and stderr over it is marked truncated in the reason;
* an operator's hook gets the allow-list (``security.env_allowlist``) of the worker's
  environment plus the manifest's ``env`` plus ``HOOKBUS_HOOK_ID``, ``HOOKBUS_HOOK_DIR`` and
  ``HOOKBUS_EVENT_KIND``; an agent's gets nothing of the worker's (see the sandbox);
* the working directory is the hook folder (or ``workdir`` inside it);
* a read-only hook folder (a worker's bundle cache) is fingerprinted when the hook is built
  and compared before each run: a folder changed since then is refused, not run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.bus import trees
from hookbus.bus.wire import HookResult, encode_json
from hookbus.errors import HookExecutionError, HookRegistrationError, HookTimeout
from hookbus.hooks.actions import confine, sandbox
from hookbus.hooks.actions.confine import confinement_prefix, harden_worker
from hookbus.hooks.actions.models import ShellAction

if TYPE_CHECKING:
    from hookbus.hooks.manifest_model import HookManifest

logger = logging.getLogger(__name__)

_READ_CHUNK_BYTES = 64 * 1024
_WRITE_CHUNK_BYTES = 64 * 1024
_REASON_MAX_CHARS = 2000
_PYTHON_NAMES = frozenset({"python", "python3"})


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def _check_runnable(hook_id: str, program: str, folder: Path, *, agent: bool) -> None:
    """Refuse, when the hook is built, a program that cannot run: a file of the hook
    folder (or an absolute path) that is missing or lacks its run bit, a bare name no PATH
    directory holds. Otherwise every call would fail, and the hook's ``on_error`` would
    answer each one as if it had run."""
    if "/" not in program:
        # an agent's hook finds its programs inside its sandbox, not on this PATH
        if not agent and shutil.which(program) is None:
            raise HookRegistrationError(
                hook_id, f"{program!r} is not on this worker's PATH; install it or give its path"
            )
        return
    path = Path(program)
    shown = path.relative_to(folder) if _inside(path, folder) else path
    if not path.is_file():
        raise HookRegistrationError(hook_id, f"{shown} does not exist (or is not a file)")
    if not os.access(path, os.X_OK):
        raise HookRegistrationError(
            hook_id,
            f"{shown} is not executable: `chmod +x` it, or run it through its interpreter "
            f'(command = "sh {shown}")',
        )


class ShellCall:
    """A compiled shell action."""

    def __init__(
        self,
        hook_id: str,
        argv: list[str],
        *,
        cwd: Path,
        folder: Path,
        env_allowlist: tuple[str, ...],
        env: dict[str, str],
        max_output_bytes: int,
        exit_codes: dict[int, str],
        network: bool = True,
        allow_unconfined: bool = False,
    ) -> None:
        self.hook_id = hook_id
        self.argv = argv
        self.cwd = cwd
        self.folder = folder
        self.env_allowlist = env_allowlist
        self.env = env
        self.cap = max_output_bytes
        self.exit_codes = exit_codes
        #: False for agent-written hooks: no network, writes only inside their folder
        self.network = network
        #: security.allow_unconfined_agent_hooks: run an agent's hook even unconfined
        self.allow_unconfined = allow_unconfined
        self._refusals = 0
        #: a read-only folder (a worker's bundle cache, checked against the signed digests
        #: when it was loaded) must still be that folder at every run: a process of the
        #: worker's user (another hook) could make it writable and change it in between
        self._seal = trees.fingerprint(folder) if trees.read_only(folder) else None

    @classmethod
    def from_manifest(
        cls,
        manifest: HookManifest,
        *,
        env_allowlist: tuple[str, ...],
        allow_unconfined_agent_hooks: bool = False,
        agent_env_allowlist: tuple[str, ...] = sandbox.DEFAULT_AGENT_ENV,
    ) -> ShellCall:
        hook_id = manifest.name
        spec = manifest.action.spec
        assert isinstance(spec, ShellAction)
        folder = Path(manifest.folder).resolve()
        agent = bool(getattr(manifest, "agent_authored", False))
        if agent:
            for name in spec.env:
                refusal = sandbox.env_refusal(name, agent_env_allowlist)
                if refusal is not None:
                    raise HookRegistrationError(hook_id, refusal)
        command = spec.command
        if spec.shell:
            text = command if isinstance(command, str) else shlex.join(command)
            argv = ["/bin/sh", "-c", text]
        else:
            try:
                argv = shlex.split(command) if isinstance(command, str) else list(command)
            except ValueError as exc:
                raise HookRegistrationError(hook_id, f"cannot split command: {exc}") from None
            if not argv:
                raise HookRegistrationError(hook_id, "the command is empty")
            first = argv[0]
            if first in _PYTHON_NAMES:
                # an agent's python is the system's, found inside its sandbox: this
                # interpreter may live where the sandbox does not reach (a venv, a home)
                argv[0] = "python3" if agent else sys.executable
            elif "/" in first and not os.path.isabs(first):
                argv[0] = str(folder / first)
            _check_runnable(hook_id, argv[0], folder, agent=agent)
        cwd = folder
        if spec.workdir:
            cwd = (folder / spec.workdir).resolve()
            if not spec.allow_workdir_outside and not _inside(cwd, folder):
                raise HookRegistrationError(
                    hook_id,
                    f"workdir {spec.workdir!r} is outside the hook folder {folder}; "
                    "keep it inside or set allow_workdir_outside = true",
                )
        return cls(
            hook_id,
            argv,
            cwd=cwd,
            folder=folder,
            env_allowlist=env_allowlist,
            env=dict(spec.env),
            max_output_bytes=spec.max_output_bytes,
            exit_codes=dict(manifest.exit_codes),
            network=not agent,
            allow_unconfined=allow_unconfined_agent_hooks,
        )

    def describe(self) -> str:
        return shlex.join(self.argv)

    def environment(self, kind: str) -> dict[str, str]:
        """The hook's environment: an agent's is built from scratch (nothing of the
        worker's), an operator's takes ``security.env_allowlist`` from the worker's."""
        if not self.network:
            env = sandbox.hook_environment(self.hook_id, kind, self.env)
            env["HOOKBUS_HOOK_DIR"] = env["HOME"] = str(self.folder)  # unsandboxed: the host's
            return env
        env = {k: os.environ[k] for k in self.env_allowlist if k in os.environ}
        env.update(self.env)
        env["HOOKBUS_HOOK_ID"] = self.hook_id
        env["HOOKBUS_HOOK_DIR"] = str(self.folder)
        env["HOOKBUS_EVENT_KIND"] = kind
        return env

    def __call__(self, arg: Any, timeout: float | None, under_deadline: bool = False) -> Any:
        kind = arg[0].kind if isinstance(arg, list) and arg else getattr(arg, "kind", "")
        data = encode_json(arg)
        code, out, err, out_over, err_over = self.execute(data, timeout, kind)
        return self.interpret(code, out, err, out_over, err_over)

    def execute(
        self, data: bytes, timeout: float | None, kind: str
    ) -> tuple[int, bytes, bytes, bool, bool]:
        """Run the command: (exit code, stdout, stderr, stdout over cap, stderr over cap)."""
        harden_worker()
        if self._seal is not None and trees.fingerprint(self.folder) != self._seal:
            why = (
                f"its files in {self.folder} changed after they were checked and loaded; "
                "it is not run until the worker loads its bundle again (restart the worker: "
                "the cache is compared with the signed digests and rewritten)"
            )
            logger.warning("hook %s refused: %s", self.hook_id, why)
            raise HookExecutionError(self.hook_id, why)
        if self.network:
            return self._run(
                [*confinement_prefix(), *self.argv], self.environment(kind), self.cwd, data, timeout
            )
        if confine.sandbox_ready():
            return self._run_sandboxed(data, timeout, kind)
        if not self.allow_unconfined:
            self._refuse_unconfined()
        return self._run(
            [*confinement_prefix(), *self.argv], self.environment(kind), self.cwd, data, timeout
        )

    def _run_sandboxed(
        self, data: bytes, timeout: float | None, kind: str
    ) -> tuple[int, bytes, bytes, bool, bool]:
        """Run an agent's hook in the sandbox: its folder at ``/hook`` (a private copy for a
        root worker), paths into the folder rewritten to it, the environment from scratch."""
        tools = sandbox.find_tools()
        if tools is None:
            raise HookExecutionError(self.hook_id, "the sandbox's binaries are gone")
        inside = sandbox.HOOK_DIR
        prefix = str(self.folder).rstrip("/") + "/"
        command = [
            inside + "/" + a[len(prefix) :] if a.startswith(prefix) else a for a in self.argv
        ]
        rel = os.path.relpath(self.cwd, self.folder)
        workdir = inside if rel.startswith("..") else os.path.normpath(os.path.join(inside, rel))
        env = sandbox.hook_environment(self.hook_id, kind, self.env)
        ids = confine.agent_ids()
        with sandbox.run_folder(self.folder, ids) as bound:
            argv = sandbox.sandbox_argv(
                tools,
                folder=bound,
                workdir=workdir,
                env=env,
                command=command,
                ids=ids,
                limits=confine.limits(),
            )
            return self._run(argv, {}, None, data, timeout)

    def _run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path | None,
        data: bytes,
        timeout: float | None,
    ) -> tuple[int, bytes, bytes, bool, bool]:
        program = self.argv[0]
        found = (
            program
            if os.path.isabs(program)
            else shutil.which(program, path=env.get("PATH", sandbox.SYSTEM_PATH))
        )
        if found is None or not os.access(found, os.X_OK):
            raise HookExecutionError(
                self.hook_id, f"cannot start {program!r}: no such executable program"
            )
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise HookExecutionError(
                self.hook_id, f"cannot start {self.argv[0]!r}: {exc.strerror or exc}"
            ) from None
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            out, err, out_over, err_over = self._communicate(proc, data, deadline, timeout)
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                code = proc.wait(left)
            except subprocess.TimeoutExpired:
                raise self._timeout(timeout) from None
        finally:
            self._kill_group(proc)
        return code, out, err, out_over, err_over

    def _refuse_unconfined(self) -> None:
        """Raise when this agent-written hook cannot be confined here (logged: the first
        refusal at WARNING, the rest at DEBUG, so a busy hook does not flood the log)."""
        refusal = confine.agent_refusal(self.hook_id)
        if refusal is None:
            return
        self._refusals += 1
        log = logger.warning if self._refusals == 1 else logger.debug
        log("%s (run %d refused; its on_error answers)", refusal, self._refusals)
        raise HookExecutionError(self.hook_id, refusal)

    def _timeout(self, timeout: float | None) -> HookTimeout:
        limit = f"{timeout:.3g}s" if timeout is not None else "its timeout"
        return HookTimeout(
            self.hook_id, f"did not finish within {limit}; its process group was killed"
        )

    def _communicate(
        self,
        proc: subprocess.Popen[bytes],
        data: bytes,
        deadline: float | None,
        timeout: float | None,
    ) -> tuple[bytes, bytes, bool, bool]:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        buffers: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
        stored = dict.fromkeys(buffers, 0)
        over = dict.fromkeys(buffers, False)
        view = memoryview(data)
        offset = 0
        with selectors.DefaultSelector() as selector:
            if data:
                os.set_blocking(proc.stdin.fileno(), False)
                selector.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
            selector.register(proc.stdout, selectors.EVENT_READ)
            selector.register(proc.stderr, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise self._timeout(timeout)
                for key, _events in selector.select(left):
                    fileobj = key.fileobj
                    if fileobj is proc.stdin:
                        try:
                            offset += os.write(
                                proc.stdin.fileno(), view[offset : offset + _WRITE_CHUNK_BYTES]
                            )
                        except BlockingIOError:
                            continue
                        except (BrokenPipeError, ConnectionResetError):
                            offset = len(data)
                        if offset >= len(data):
                            selector.unregister(proc.stdin)
                            with contextlib.suppress(OSError):
                                proc.stdin.close()
                        continue
                    fd = key.fd
                    chunk = os.read(fd, _READ_CHUNK_BYTES)
                    if not chunk:
                        selector.unregister(fileobj)
                        continue
                    room = self.cap - stored[fd]
                    if room > 0:
                        buffers[fd].append(chunk[:room])
                        stored[fd] += min(room, len(chunk))
                    if len(chunk) > room:
                        over[fd] = True
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        return (
            b"".join(buffers[out_fd]),
            b"".join(buffers[err_fd]),
            over[out_fd],
            over[err_fd],
        )

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        """Kill whatever is left of the hook's process group, then reap the leader."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def interpret(
        self, code: int, out: bytes, err: bytes, out_over: bool, err_over: bool = False
    ) -> Any:
        """Map an exit code and output to the hook's raw answer (or raise). Output past the
        cap was read and discarded: the answer says it was truncated."""
        reason = err.decode("utf-8", "replace").strip()[-_REASON_MAX_CHARS:] or None
        if reason is not None and err_over:
            reason += f" (stderr truncated: over the {self.cap}-byte cap)"
        mapped = self.exit_codes.get(code)
        if mapped is None:
            if code == 0:
                mapped = "continue"
            elif code == 2:
                mapped = "deny"
        if mapped in ("continue", "allow"):
            if out_over:
                raise HookExecutionError(
                    self.hook_id,
                    f"stdout exceeded the {self.cap}-byte cap (truncated; the rest was "
                    "discarded); print less",
                )
            text = out.strip()
            if not text:
                return None
            try:
                return json.loads(text)
            except (ValueError, UnicodeDecodeError):
                preview = text[:120].decode("utf-8", "replace")
                raise HookExecutionError(
                    self.hook_id,
                    f"stdout is not JSON (exit 0 means: print nothing, or one "
                    f"JSON object): {preview!r}",
                ) from None
        if mapped in ("deny", "ask", "halt"):
            return HookResult(
                outcome=mapped,  # type: ignore[arg-type]
                reason=reason or f"{mapped} by hook {self.hook_id!r} (exit code {code})",
            )
        if code < 0:
            raise HookExecutionError(self.hook_id, f"killed by signal {-code}")
        detail = f": {reason}" if reason else ""
        raise HookExecutionError(self.hook_id, f"exit code {code}{detail}")
