"""The sandbox every agent-written shell or python-script hook runs in (bubblewrap).

The audit reads what an agent wrote; this is what holds when the audit misses something. A
run of an agent's hook is started as::

    setpriv (root worker only: drop to the agent user, no groups, no capabilities,
             no_new_privs)
      prlimit (CPU seconds, address space, processes, file size, open files)
        bwrap --unshare-all --unshare-user --disable-userns --die-with-parent ...
          the hook's command

and sees, inside:

* a private mount namespace holding only a read-only runtime (``/usr`` and the top-level
  links into it, ``/etc/alternatives``, ``/etc/ld.so.cache``), a fresh ``/dev`` mounted
  read-only with a size-bounded ``/dev/shm``, a private ``/proc`` (its own PID namespace:
  no host process is listed, no host ``cmdline`` can be read), a size-bounded ``/tmp``, its
  folder read-only at ``/hook-src`` and a writable copy of it at ``/hook`` on a
  size-bounded tmpfs of the run's own (copied in before the command starts, gone with the
  run). Every place the run can write is a tmpfs of a fixed size, so RAM and disk a run
  takes are bounded as a whole (``RLIMIT_AS`` does not count tmpfs, ``RLIMIT_FSIZE`` is per
  file), and nothing it writes reaches the next run or the worker's cache. Nothing else of
  the host: no ``/run``, no ``/var``, no home, no ``hookbus.toml``, no socket file;
* its own network namespace (a loopback and nothing else: no network, and no abstract unix
  socket of the host, those belonging to the host's network namespace);
* an environment built from scratch (:func:`hook_environment`): ``PATH``, ``HOME``,
  ``LANG``, ``TMPDIR``, the ``HOOKBUS_HOOK_*`` names, and the manifest's ``env`` entries
  whose names pass :func:`env_refusal` (never ``LD_*``, ``PYTHON*``, ``BASH_ENV``...);
* no privilege at any point: every program between the worker and the sandbox (``setpriv``,
  ``prlimit``, ``bwrap``) is a system binary started with an empty environment, so neither
  the dynamic loader nor any interpreter runs as root with anything an agent chose; a root
  worker's hook runs as the agent user (``nobody`` by default), from a copy of its folder
  that user may read; an unprivileged worker's, as the worker, from the cache folder
  itself: either way bound read-only, so the worker's signed cache is never written.

Where ``bwrap``, ``setpriv`` or ``prlimit`` is missing, or the kernel refuses the
namespaces, :func:`probe` says so and agents' hooks are refused (see
:func:`hookbus.hooks.actions.confine.agent_refusal`). ``.ci/run`` installs Debian's
``bubblewrap`` where it is missing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from hookbus import defaults
from hookbus.bus.trees import remove_tree, walk

#: Where the hook's folder appears inside the sandbox (a writable copy, private to the run).
HOOK_DIR = "/hook"
#: Where the folder itself is bound inside the sandbox, read-only (the copy's source).
SOURCE_DIR = "/hook-src"
#: The first thing a run does: copy its folder into the run's own tmpfs, then start the
#: hook's command there (``$0``: the working directory; the command as given, unparsed).
_COPY_IN = f'cp -R --preserve=mode,timestamps {SOURCE_DIR}/. {HOOK_DIR}/ && cd "$0" && exec "$@"'
#: The only places system binaries are looked up (never the worker's own ``PATH``).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
_PROBE_TIMEOUT_S = 10.0
_MIB = 1024 * 1024

#: Names an agent's manifest ``env`` may always set (the operator adds more with
#: ``security.agent_env_allowlist``), besides any name starting with :data:`OWN_PREFIX`.
DEFAULT_AGENT_ENV: tuple[str, ...] = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "NO_COLOR", "TERM")
#: Names an agent may set freely: they mean nothing to any program but the hook.
OWN_PREFIX = "HOOK_"
#: Names no agent's hook may set, whatever the allowlist says: each makes a loader, a
#: shell or an interpreter run code or read files the hook did not name.
REFUSED_PREFIXES: tuple[str, ...] = (
    "LD_",
    "DYLD_",
    "PYTHON",
    "BASH_FUNC_",
    "PERL",
    "RUBY",
    "NODE_",
    "GIT_",
    "GCONV",
    "GLIBC_",
    "MALLOC_",
    "JAVA_",
    "LUA_",
    "TCL",
    "SSL_",
    "OPENSSL_",
    "HOOKBUS_",
)
REFUSED_NAMES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PS0",
        "PS1",
        "PS2",
        "PS4",
        "IFS",
        "SHELLOPTS",
        "BASHOPTS",
        "GLOBIGNORE",
        "CDPATH",
        "PATH",
        "HOME",
        "TMPDIR",
        "SHELL",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RES_OPTIONS",
        "LOCALDOMAIN",
        "TERMINFO",
        "TERMCAP",
        "INPUTRC",
        "HISTFILE",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "LESSOPEN",
        "TZDIR",
        "XDG_CONFIG_HOME",
        "XDG_DATA_DIRS",
    }
)
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,63}\Z")


def env_refusal(name: str, allowlist: Iterable[str] = DEFAULT_AGENT_ENV) -> str | None:
    """Why an agent's manifest may not set the variable ``name``, or None when it may."""
    if not _ENV_NAME.match(name):
        return f"env name {name!r} is not an upper-case identifier of at most 64 characters"
    if name in REFUSED_NAMES or name.startswith(REFUSED_PREFIXES):
        return (
            f"env name {name!r} changes what a loader, shell or interpreter runs; an agent's "
            "hook may not set it"
        )
    if name.startswith(OWN_PREFIX) or name in set(allowlist) | set(DEFAULT_AGENT_ENV):
        return None
    return (
        f"env name {name!r} is not allowed for an agent's hook: use a {OWN_PREFIX}* name, or "
        "ask the operator to add it to security.agent_env_allowlist"
    )


@dataclass(frozen=True)
class Limits:
    """The resource limits of one sandboxed run (``security.agent_*`` settings)."""

    cpu_s: int = defaults.DEFAULT_AGENT_CPU_S
    memory_bytes: int = defaults.DEFAULT_AGENT_MEMORY_MB * _MIB
    processes: int = defaults.DEFAULT_AGENT_MAX_PROCESSES
    file_bytes: int = defaults.DEFAULT_AGENT_MAX_FILE_MB * _MIB
    open_files: int = defaults.DEFAULT_AGENT_OPEN_FILES
    tmp_bytes: int = defaults.DEFAULT_AGENT_TMP_MB * _MIB
    #: the run's writable copy of its folder at ``/hook`` (a tmpfs of this size)
    hook_bytes: int = defaults.DEFAULT_AGENT_HOOK_MB * _MIB
    #: ``/dev/shm`` (a tmpfs of this size; ``/dev`` itself is read-only)
    shm_bytes: int = defaults.DEFAULT_AGENT_SHM_MB * _MIB

    def prlimit(self, program: str) -> list[str]:
        """The ``prlimit`` argv that applies these limits to what it starts."""
        return [
            program,
            f"--cpu={self.cpu_s}",
            f"--as={self.memory_bytes}",
            f"--nproc={self.processes}",
            f"--fsize={self.file_bytes}",
            f"--nofile={self.open_files}",
            "--core=0",
        ]

    def words(self) -> str:
        return (
            f"cpu {self.cpu_s}s, memory {self.memory_bytes // _MIB} MiB, "
            f"{self.processes} processes, files up to {self.file_bytes // _MIB} MiB"
        )


def agent_limits(security: object) -> Limits:
    """The :class:`Limits` a ``[security]`` settings section asks for."""
    return Limits(
        cpu_s=int(getattr(security, "agent_cpu_secs", Limits.cpu_s)),
        memory_bytes=int(getattr(security, "agent_memory_mb", defaults.DEFAULT_AGENT_MEMORY_MB))
        * _MIB,
        processes=int(getattr(security, "agent_max_processes", Limits.processes)),
        file_bytes=int(getattr(security, "agent_max_file_mb", defaults.DEFAULT_AGENT_MAX_FILE_MB))
        * _MIB,
    )


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the system binaries the sandbox is built with."""

    bwrap: str
    setpriv: str
    prlimit: str


def find_tools() -> Tools | None:
    """The sandbox's binaries, looked up in :data:`SYSTEM_PATH` only; None if one is missing."""
    found = [shutil.which(name, path=SYSTEM_PATH) for name in ("bwrap", "setpriv", "prlimit")]
    if None in found:
        return None
    bwrap, setpriv, prlimit = (str(path) for path in found)
    return Tools(bwrap=bwrap, setpriv=setpriv, prlimit=prlimit)


def _runtime_binds() -> list[str]:
    """The read-only runtime: ``/usr``, the top-level folders that are links into it (or
    read-only binds where they are real folders), and the few ``/etc`` files programs
    need to start (the loader's cache, Debian's alternatives)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ("/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", name, name]
    return args


def sandbox_argv(
    tools: Tools,
    *,
    folder: str,
    workdir: str,
    env: Mapping[str, str],
    command: list[str],
    ids: tuple[int, int] | None,
    limits: Limits,
) -> list[str]:
    """The full argv of one sandboxed run: ``folder`` (a path on the host) appears at
    :data:`HOOK_DIR`, the run starts in ``workdir`` (a path inside), with exactly ``env``."""
    argv: list[str] = []
    if ids is not None:
        argv += [
            tools.setpriv,
            f"--reuid={ids[0]}",
            f"--regid={ids[1]}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
    argv += limits.prlimit(tools.prlimit)
    argv += [
        tools.bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        *_runtime_binds(),
        "--proc",
        "/proc",
        # RAM a run can fill is bounded: /dev read-only, each tmpfs of a fixed size
        *("--dev", "/dev"),
        *("--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm"),
        *("--remount-ro", "/dev"),
        *("--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"),
        # the folder is read-only (the worker's signed cache, or a root worker's copy);
        # the hook works in a copy of it on a tmpfs of its own, gone with the run
        *("--ro-bind", folder, SOURCE_DIR),
        *("--size", str(limits.hook_bytes), "--tmpfs", HOOK_DIR),
        *("--chdir", "/"),
        "--clearenv",
    ]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", "/bin/sh", "-c", _COPY_IN, workdir, *command]


def hook_environment(hook_id: str, kind: str, manifest_env: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a sandboxed hook: nothing comes from the worker's."""
    env = {
        "PATH": SYSTEM_PATH,
        "HOME": HOOK_DIR,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
    }
    env.update(manifest_env)
    env["HOOKBUS_HOOK_ID"] = hook_id
    env["HOOKBUS_HOOK_DIR"] = HOOK_DIR
    env["HOOKBUS_EVENT_KIND"] = kind
    return env


def _copy_tree(src: Path, dst: Path, ids: tuple[int, int]) -> None:
    """Copy regular files and folders (links and special files are left out) owned by
    ``ids``: a root worker's copy of a hook's folder that the agent user may read, bound
    read-only for one run. Walked without recursion: a folder of any depth is copied."""
    for here, folders, others in walk(src):
        target_dir = dst / here.relative_to(src)
        for name in folders:
            target = target_dir / name
            target.mkdir((os.lstat(here / name).st_mode & 0o777) | 0o700)
            os.chown(target, *ids)
        for name in others:
            entry = here / name
            st = os.lstat(entry)
            if not stat.S_ISREG(st.st_mode):
                continue
            target = target_dir / name
            shutil.copyfile(entry, target, follow_symlinks=False)
            target.chmod((st.st_mode & 0o777) | 0o600)
            os.chown(target, *ids)


@contextlib.contextmanager
def run_folder(folder: Path, ids: tuple[int, int] | None) -> Iterator[str]:
    """The host path bound at :data:`HOOK_DIR` for one run: the folder itself for an
    unprivileged worker (whose hooks keep its uid inside their user namespace), else a
    private copy owned by the agent user, removed after the run. The copy's parent is
    ``0711``: the agent user may reach the copy by its random name and list nothing."""
    if ids is None:
        yield str(folder)
        return
    scratch = Path(tempfile.mkdtemp(prefix="hookbus-sandbox-"))
    try:
        scratch.chmod(0o711)
        copy = scratch / "hook"
        copy.mkdir(0o700)
        _copy_tree(folder, copy, ids)
        os.chown(copy, *ids)
        yield str(copy)
    finally:
        remove_tree(scratch)


_lock = threading.Lock()
_probed: dict[tuple[tuple[int, int] | None, Limits], tuple[bool, str]] = {}


def probe(ids: tuple[int, int] | None, limits: Limits) -> tuple[bool, str]:
    """Whether a sandboxed run works here (one real run of ``true`` in it), and in words
    why not. Cached per (user, limits)."""
    key = (ids, limits)
    with _lock:
        if key not in _probed:
            _probed[key] = _probe(ids, limits)
        return _probed[key]


def _probe(ids: tuple[int, int] | None, limits: Limits) -> tuple[bool, str]:
    tools = find_tools()
    if tools is None:
        return False, (
            "no sandbox: bwrap, setpriv or prlimit is missing (install Debian's bubblewrap "
            "and util-linux)"
        )
    with tempfile.TemporaryDirectory() as scratch, run_folder(Path(scratch), ids) as bound:
        argv = sandbox_argv(
            tools,
            folder=bound,
            workdir=HOOK_DIR,
            env=hook_environment("probe", "probe", {}),
            command=["true"],
            ids=ids,
            limits=limits,
        )
        try:
            done = subprocess.run(
                argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, env={}, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"no sandbox: bwrap could not start ({exc})"
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[-300:]
        return False, f"no sandbox: bwrap failed here ({detail or done.returncode})"
    return True, f"bubblewrap sandbox ({limits.words()})"
