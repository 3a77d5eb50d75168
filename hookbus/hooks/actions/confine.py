"""What keeps a shell hook's processes in their run and out of the worker's secrets.

* **Every process a hook starts dies with the run** (issue 13 row 7). A process group is
  not enough: ``setsid sleep 1000 &`` or a double fork leaves it. So each run is started as
  the first process of its own PID namespace (``unshare --pid --fork --kill-child``): when
  that process exits, or the run is killed at its timeout, the kernel kills every other
  process in the namespace, however it detached.
* **A hook cannot read the worker's secrets** (row 6): the worker marks itself non-dumpable
  (``prctl(PR_SET_DUMPABLE, 0)``), so ``/proc/<worker>/environ`` and ``mem`` need
  ``CAP_SYS_PTRACE`` over it; the hook gets none: it runs in its own user namespace
  (``--user --map-root-user``), or, where only the PID namespace is allowed (root without
  user namespaces), with every capability dropped (``setpriv``). ``unshare`` itself is started
  with the hook's scrubbed environment, so no process between them holds the secrets.

* **An agent-written hook has no network and writes only inside its own folder** (issue 13,
  "Also"): it also gets a network namespace of its own (``--net``: no interface but a down
  loopback) and a mount namespace in which every mount is read-only but its folder
  (:data:`LOCKDOWN`, about 14 ms more per run: a small python step before the hook). The
  http action, whose destinations are checked (:mod:`hookbus.hooks.actions.egress`), is how
  an agent's hook reaches the network. Where that cannot be set up, an agent's hook is
  refused (:func:`agent_refusal`) unless the operator sets ``allow_unconfined_agent_hooks``.
* **A root worker runs agent-written hooks as** ``nobody`` (row 6): with no user namespace
  (its root would be the host's root), the lockdown step builds the mounts as root, gives
  the hook a private ``/tmp`` holding a copy of its folder, then drops to :func:`agent_uid`
  (no groups, no capabilities, no_new_privs). Operators' hooks keep the worker's user.

The best of these the kernel allows is probed once per process. Where none is allowed
(an unprivileged user on a host that forbids user namespaces), hooks still run, in a process
group killed at the end, and :func:`confinement` says so for the worker to report.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading

logger = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
#: How :func:`agent_confinement` starts when an agent's hook is fully confined.
AGENT_CONFINED = "no network, writes"
_PROBE_TIMEOUT_S = 5.0

_lock = threading.Lock()
_prefix: tuple[str, ...] | None = None
_offline: tuple[str, ...] | None = None
_mode = "unprobed"
_agent_mode = "unprobed"
_hardened = False


def _works(argv: list[str], cwd: str | None = None) -> bool:
    try:
        done = subprocess.run(
            [*argv, "true"],
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            cwd=cwd,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _probe() -> tuple[tuple[str, ...], str]:
    if not sys.platform.startswith("linux"):
        return (), "none (not Linux): a hook's detached processes may outlive its run"
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), "none (no unshare binary): a hook's detached processes may outlive its run"
    pid_ns = [unshare, "--pid", "--fork", "--kill-child"]
    with_user = [unshare, "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]
    if _works(with_user):
        return tuple(with_user), "pid+user namespace"
    setpriv = shutil.which("setpriv")
    if _works(pid_ns):
        if os.geteuid() == 0 and setpriv is not None:
            drop = [setpriv, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
            if _works([*pid_ns, *drop]):
                return (*pid_ns, *drop), "pid namespace, capabilities dropped"
        return tuple(pid_ns), "pid namespace"
    return (), (
        "none (the kernel allows this user neither a PID nor a user namespace): a hook's "
        "detached processes may outlive its run"
    )


def confinement_prefix() -> tuple[str, ...]:
    """The argv prefix that confines one hook run (empty when nothing is available)."""
    global _prefix, _mode
    with _lock:
        if _prefix is None:
            _prefix, _mode = _probe()
            if _prefix:
                logger.info("shell hooks run confined: %s", _mode)
            else:
                logger.warning("shell hooks run unconfined: %s", _mode)
        return _prefix


#: Run inside the hook's mount namespace before the hook: every mount read-only (one
#: ``mount_setattr`` call, recursive), then the hook's folder bound onto itself writable.
#: For a worker running as root (argv[2] ``uid:gid``, not ``-``): a private tmpfs covers ``/tmp``
#: and holds a copy of the folder owned by that uid at ``/tmp/hook`` (the hook's writable
#: scratch for this run, reachable by that uid whatever the folder's parents allow; the
#: worker's cache is never written); the working directory, the command's paths into the
#: folder and ``HOOKBUS_HOOK_DIR`` point into the copy, and the hook runs as that uid with no
#: supplementary groups, no capabilities and no_new_privs. Any failure ends the run (exit
#: 126): an agent's hook never runs half-confined.
LOCKDOWN = """
import ctypes, os, sys, warnings  # execvp imports warnings: before the uid switch
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("set", "clr", "propagation", "userns_fd")]
def setattr_(path, flags, on, off):
    attr = Attr(on, off, 0, 0)
    if libc.syscall(442, -100, path, flags, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        raise OSError(ctypes.get_errno(), "mount_setattr " + path.decode())
def copy(src, dst, uid, gid):
    for entry in os.scandir(src):
        target = os.path.join(dst, entry.name)
        mode = entry.stat(follow_symlinks=False).st_mode & 0o777
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(target, mode | 0o700)
            copy(entry.path, target, uid, gid)
        elif entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as r, open(target, "xb") as w:
                w.write(r.read())
            os.chmod(target, mode | 0o600)
        else:
            continue
        os.chown(target, uid, gid)
folder = os.fsencode(sys.argv[1])
user = sys.argv[2]
COPY = "/tmp/hook"
try:
    setattr_(b"/", 0x8000, 1, 0)
    if user == "-":
        if libc.mount(folder, folder, None, 4096, None) != 0:
            raise OSError(ctypes.get_errno(), "bind " + sys.argv[1])
        setattr_(folder, 0, 0, 1)
    else:
        uid, gid = (int(part) for part in user.split(":"))
        src = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        rel = os.path.relpath(os.getcwd(), sys.argv[1])
        opts = b"mode=0755,size=64m,nr_inodes=4096,uid=%d,gid=%d" % (uid, gid)
        if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 6, opts) != 0:
            raise OSError(ctypes.get_errno(), "tmpfs /tmp")
        os.mkdir(COPY, 0o755)
        os.chown(COPY, uid, gid)
        copy("/proc/self/fd/%d" % src, COPY, uid, gid)
        os.close(src)
        if not rel.startswith(".."):  # a workdir outside the folder stays where it is
            os.chdir(os.path.normpath(os.path.join(COPY, rel)))
        old = sys.argv[1].rstrip("/") + "/"
        sys.argv[3:] = [COPY + "/" + a[len(old):] if a.startswith(old) else a for a in sys.argv[3:]]
        os.environ["HOOKBUS_HOOK_DIR"] = COPY
    if user == "-":
        os.chdir(os.getcwd())  # the working directory, looked up again, is on the new mount
    else:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if libc.prctl(38, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
except OSError as exc:
    sys.stderr.write("hookbus: cannot confine the hook's writes: %s\\n" % exc)
    os._exit(126)
os.execvp(sys.argv[3], sys.argv[3:])
"""

#: The user agent-written hooks run as when the worker is root, unless
#: ``security.agent_hook_user`` names another (:func:`configure_agent_user`).
AGENT_USER = "nobody"
_OVERFLOW_ID = 65534
_agent_user = AGENT_USER


def configure_agent_user(name: str) -> None:
    """Set the user (a name or a numeric uid) a root worker runs agent-written hooks as;
    a change is probed again on next use."""
    global _agent_user, _offline, _agent_mode
    with _lock:
        if name != _agent_user:
            _agent_user = name
            _offline, _agent_mode = None, "unprobed"


def agent_ids() -> tuple[int, int] | None:
    """(uid, gid) an agent-written hook runs as, or None when it keeps the worker's (a
    worker that is not root is already unprivileged; its hooks run in a user namespace).
    Raises ValueError when the configured user cannot be used (unknown, or root)."""
    if os.geteuid() != 0:
        return None
    name = _agent_user
    if name.isdigit():
        ids = (int(name), int(name))
    else:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            if name != AGENT_USER:
                raise ValueError(f"security.agent_hook_user {name!r} names no user") from None
            ids = (_OVERFLOW_ID, _OVERFLOW_ID)  # the kernel's overflow id: unprivileged
        else:
            ids = (entry.pw_uid, entry.pw_gid)
    if ids[0] == 0 or ids[1] == 0:
        raise ValueError(f"security.agent_hook_user {name!r} is root; name an unprivileged user")
    return ids


def agent_uid() -> int | None:
    """The uid of :func:`agent_ids`, or None (not root, or no usable user configured)."""
    try:
        ids = agent_ids()
    except ValueError:
        return None
    return None if ids is None else ids[0]


def _lockdown(folder: str, ids: tuple[int, int] | None) -> tuple[str, ...]:
    user = "-" if ids is None else f"{ids[0]}:{ids[1]}"
    return (sys.executable, "-I", "-S", "-c", LOCKDOWN, folder, user)


def agent_prefix(folder: str) -> tuple[str, ...]:
    """The prefix for an agent-written hook whose folder is ``folder``: its own network
    namespace (no network) and mount namespace (writes only inside ``folder``) on top of
    :func:`confinement_prefix`, as far as the kernel allows; as :func:`agent_uid` when the
    worker is root."""
    global _offline, _agent_mode
    base = confinement_prefix()
    with _lock:
        if _offline is None:
            _offline, _agent_mode = _probe_agent(base)
            log = logger.info if _agent_mode.startswith(AGENT_CONFINED) else logger.warning
            log("agent-written shell hooks: %s", _agent_mode)
        if _offline and _agent_mode.startswith(AGENT_CONFINED):
            return (*_offline, *_lockdown(folder, agent_ids()))
        return _offline or base


def _probe_agent(base: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    if not base or os.path.basename(base[0]) != "unshare":
        return (), "no confinement of their own: they keep the network and may write anywhere"
    try:
        ids = agent_ids()
    except ValueError as exc:
        return (), f"no confinement of their own (root, but {exc}): they would run as root"
    if ids is not None:
        # root: no user namespace (its root would be the host's root); the lockdown step
        # drops to ``ids`` after building the mounts
        walled: tuple[str, ...] = (base[0], "--mount", "--net", "--pid", "--fork", "--kill-child")
        with tempfile.TemporaryDirectory() as scratch:
            if _works([*walled, *_lockdown(scratch, ids)], cwd=scratch):
                return walled, (
                    f"{AGENT_CONFINED} only inside their own folder (a private copy per run), "
                    f"as uid {ids[0]} ({_agent_user})"
                )
        return (), (
            "no confinement of their own (root, but the private mounts or the switch to "
            f"{_agent_user} failed): they would run as root"
        )
    offline = (base[0], "--net", *base[1:])
    walled = (base[0], "--mount", "--net", *base[1:])
    with tempfile.TemporaryDirectory() as scratch:
        if _works([*walled, *_lockdown(scratch, None)], cwd=scratch):
            return walled, f"{AGENT_CONFINED} only inside their own folder"
    if _works(list(offline)):
        return offline, "no network (writes not confined: no mount namespace)"
    return (), "no confinement of their own: they keep the network and may write anywhere"


def confinement() -> str:
    """How shell hooks are confined here, in words (probing on first use)."""
    confinement_prefix()
    return _mode


def agent_confinement() -> str:
    """How agent-written shell hooks are confined beyond :func:`confinement`, in words
    (starts with :data:`AGENT_CONFINED` when they run without network, writes walled in)."""
    agent_prefix(tempfile.gettempdir())
    return _agent_mode


#: The setting that lets agent-written code run where it cannot be confined.
OPT_IN = "security.allow_unconfined_agent_hooks"


def agent_refusal(hook_id: str, *, in_process: bool = False) -> str | None:
    """Why an agent-written hook may not run here, or None when it may.

    An agent's shell (or python script) hook runs only fully confined: no network and writes
    only inside its folder. Where the kernel gives less, running it would hand an agent's code
    the worker's network and file system, so it is refused (the hook's ``on_error`` answers)
    unless the operator sets :data:`OPT_IN`. An in-process python action can never be
    confined (it runs inside the worker), so an agent's is always refused without the opt-in.
    """
    if in_process:
        return (
            f"refused: agent-written in-process python hook {hook_id!r} would run inside the "
            f"worker, where nothing confines it; write it as a script hook (hooks write "
            f"--spec with script + language) or set {OPT_IN} = true to run it anyway"
        )
    mode = agent_confinement()
    if mode.startswith(AGENT_CONFINED):
        return None
    return (
        f"refused: agent-written hook {hook_id!r} cannot be confined on this machine ({mode}); "
        f"set {OPT_IN} = true to run agent hooks unconfined"
    )


def describe(*, allow_unconfined_agent_hooks: bool = False) -> str:
    """One short line for a worker's heartbeat (``confinement``) and start-up log: how
    hooks are confined, and what happens to agent-written ones. Starts with ``none`` when
    hooks run unconfined (``hookbus status`` warns on that)."""
    base = confinement()
    agent = agent_confinement()
    if agent.startswith(AGENT_CONFINED):
        agents = f"agent hooks: {agent}"
    elif allow_unconfined_agent_hooks:
        agents = f"agent hooks run UNCONFINED ({OPT_IN}): {agent}"
    else:
        agents = f"agent hooks refused: {agent}"
    return f"{base}; {agents}"


def start_worker(
    *, allow_unconfined_agent_hooks: bool = False, agent_hook_user: str = AGENT_USER
) -> str:
    """What every worker role calls at start: mark the process non-dumpable, set the user a
    root worker runs agents' hooks as, probe the confinement, say it in the log (a warning
    when hooks or agents' hooks run unconfined or agents' hooks will be refused) and return
    the line its heartbeat carries."""
    harden_worker()
    configure_agent_user(agent_hook_user)
    line = describe(allow_unconfined_agent_hooks=allow_unconfined_agent_hooks)
    calm = not line.startswith("none") and "agent hooks: " in line
    (logger.info if calm else logger.warning)("hook confinement: %s", line)
    return line


def harden_worker() -> None:
    """Mark this process non-dumpable, once: its ``/proc`` files (``environ`` with the Redis
    password, ``mem``) become unreadable to processes without ``CAP_SYS_PTRACE`` over it."""
    global _hardened
    if _hardened or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            logger.warning("could not mark the worker non-dumpable (errno %d)", ctypes.get_errno())
            return
    _hardened = True
