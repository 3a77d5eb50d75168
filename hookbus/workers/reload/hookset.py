"""The hook set a worker runs, and how it follows reloads.

Every worker role (chain, fan-out, RQ) holds its hooks in a :class:`HookHost`: it loads the
current bundle when the stamp names one (else the ``--hooks-dir`` folder) before the worker
serves, then follows reloads in a daemon thread. A reload is announced on the reload
channel, but pub/sub is lossy (a disconnected subscriber misses messages, and redis-py
resubscribes silently after a reconnect), so the thread also compares the stamp after every
reconnect and about once a second. Following a reload means: fetch and verify the bundle,
write its files into a local cache folder keyed by version (executable bits kept), load the
hooks from there, and swap them into the registry with one ``replace_dynamic`` call, so a
request runs entirely on the old set or entirely on the new one. Static (code-registered)
hooks are untouched. A hook that does not load here (its ``requires`` unmet, an import
error) is skipped and listed in :meth:`HookHost.info`'s ``problems``, which heartbeats carry
as this worker's ack; a refused bundle is listed there until a set this worker runs is named.

Wiring in a worker::

    host = HookHost(registry, settings, hooks_dir=hooks_dir)
    host.start(client)                        # loads before serving
    heartbeat = Heartbeat(client, keys, role="chain", interval_ms=..., info=host.info)
    host.add_listener(heartbeat.beat_now)     # ack a swap at once, not at the next beat
    ...
    host.stop()
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bundles import signing, stamp, store
from hookbus.bundles.cache import clean_cache, default_cache_root, materialise
from hookbus.bundles.pack import dir_version
from hookbus.bus import ids
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.keys import Keys
from hookbus.bus.wire import now_ms
from hookbus.errors import BundleError, HookBusError
from hookbus.hooks.actions import confine
from hookbus.hooks.actions.hook_threads import hooks_at_cap
from hookbus.hooks.actions.llm import judge_stats
from hookbus.hooks.actions.sandbox import agent_limits
from hookbus.workers.reload import reseed, trust
from hookbus.workers.reload.subscriber import ReloadSubscriber
from hookbus.workers.reload.swap import swap_folder

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from hookbus.bundles.model import BundleMeta
    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)

#: How often the follower compares the stamp even without a broadcast, in seconds.
STAMP_POLL_INTERVAL_S = 1.0
#: Longest single wait for a pub/sub message (bounds how long stop() takes), in seconds.
PUBSUB_WAIT_S = 0.25
#: Longest pause between attempts to re-subscribe after a connection error, in seconds.
RECONNECT_MAX_WAIT_S = 2.0
#: How long stop() waits for the follower thread, in seconds.
STOP_TIMEOUT_S = 3.0
#: Cached bundle folders kept on disk beyond the one in use.
CACHE_KEEP_MIN = 5

Listener = Callable[[], object]

#: ``trust`` of a worker without a verify key (heartbeats, ``hookbus status``).
UNSIGNED = "unsigned"
#: Stands for "read ``$HOOKBUS_VERIFY_KEY_FILE``" as the default of ``verify_key``.
FROM_ENV = "env"


class HookHost:
    """Holds a worker's :class:`HookRegistry` and keeps its dynamic hooks on the current
    bundle. Thread-safe: loads are serialised, the swap itself is the registry's."""

    def __init__(
        self,
        registry: HookRegistry,
        settings: Settings,
        *,
        hooks_dir: Path | None,
        cache_dir: Path | None = None,
        verify_key: Ed25519PublicKey | str | None = FROM_ENV,
    ) -> None:
        self._registry = registry
        self._settings = settings
        self._hooks_dir = Path(hooks_dir) if hooks_dir is not None else None
        self._keys = Keys.for_namespace(settings.namespace)
        self._cache_root = cache_dir or default_cache_root(settings)
        self._stamp_file = stamp.StampFileWatch(stamp.stamp_file_path(settings))
        # None: unsigned mode (any bundle in Redis runs; said loudly at start and in info())
        self._verify_key = (
            signing.verify_key_from_env() if isinstance(verify_key, str) else verify_key
        )
        self._key_id = signing.key_id(self._verify_key) if self._verify_key else ""
        self._last_refusal: dict[str, Any] | None = None
        self._cache_name: str | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: redis.Redis | None = None
        self._pubsub: ReloadSubscriber | None = None
        self._version: str | None = None
        self._source: str | None = None  # "bundle" | "dir" | None
        self._guarded: tuple[str, ...] = ()  # the kinds the bundle served guards
        self._hook_count = 0
        self._problems: list[str] = []
        self._refusals: list[str] = []  # the problems that are refusals of another set
        #: kinds whose guard could not be built in the current set (see missing_guards())
        self._missing_guards: list[str] = []
        #: other kinds an enforcing hook of the current set decided but could not be built
        self._missing_kinds: list[str] = []
        self._listeners: list[Listener] = []
        self._last_check = 0.0
        self._swaps = 0
        self._refused_version: str | None = None
        self._floor: int | None = None  # release sequence below which bundles are refused
        self._confinement = "unprobed"
        self.client_name = (
            f"hookbus-reload.{settings.namespace}.{socket.gethostname()}.{os.getpid()}."
            f"{ids.token(6)}"
        )

    # --- public surface ---------------------------------------------------------------

    @property
    def registry(self) -> HookRegistry:
        return self._registry

    @property
    def version(self) -> str | None:
        """The version this worker runs: a bundle version, ``dir:<hash>`` or None."""
        return self._version

    @property
    def swaps(self) -> int:
        """How many hook sets were swapped in since construction."""
        return self._swaps

    @property
    def verifies(self) -> bool:
        """True when this worker checks bundle signatures (a verify key is configured)."""
        return self._verify_key is not None

    def info(self) -> dict[str, Any]:
        """The ack fields heartbeats carry: ``version``, ``hooks`` (count), ``problems``,
        ``trust`` (``verified:<key id>`` or ``unsigned``), ``refused`` (the last bundle
        refused here: version, reason, at_ms; or None), ``confinement`` (``none...`` when
        unconfined); only while there are some: ``hooks_at_cap``, ``missing_guards`` and
        ``missing_kinds`` (kinds whose guard, or other enforcing hook, could not be built
        here), ``judges`` (per judge hook: calls, shared verdicts, failures, tokens)."""
        at_cap = hooks_at_cap()
        with self._lock:
            info: dict[str, Any] = {
                "version": self._version,
                "hooks": self._hook_count,
                "problems": list(self._problems),
                "trust": f"verified:{self._key_id}" if self._verify_key else UNSIGNED,
                "refused": dict(self._last_refusal) if self._last_refusal else None,
                "confinement": self._confinement,
            }
            missing = list(self._missing_guards)
            lacking = list(self._missing_kinds)
        if at_cap:
            info["hooks_at_cap"] = at_cap
        judges = judge_stats()
        if judges:
            info["judges"] = judges
        if missing:
            info["missing_guards"] = missing
        if lacking:
            info["missing_kinds"] = lacking
        return info

    def missing_guards(self) -> list[str]:
        """Event kinds whose guard (``guard = true`` or ``on_error = "deny"``) was left out
        of the current set because it could not be built here: answer them fail-closed."""
        with self._lock:
            return list(self._missing_guards)

    def add_listener(self, callback: Listener) -> None:
        """Call ``callback()`` after every load attempt (swap or refusal), from the thread
        that loaded; heartbeats use it to ack at once. Exceptions are logged, not raised."""
        self._listeners.append(callback)

    def start(self, client: redis.Redis) -> None:
        """Load the current bundle (or ``hooks_dir``) now, then follow reloads."""
        self._client = client
        self._stop.clear()
        # every role hosts its hooks here: harden the process and say how hooks are confined
        security = self._settings.security
        self._confinement = confine.start_worker(
            allow_unconfined_agent_hooks=security.allow_unconfined_agent_hooks,
            agent_hook_user=security.agent_hook_user,
            agent_limits=agent_limits(security),
        )
        if self._verify_key is None:
            signing.warn_unsigned("worker")
        else:
            log.info("bundles must be signed by key %s", self._key_id)
        self._initial_load(client)
        self._thread = threading.Thread(target=self._follow, name="hookbus-reload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following reloads (the loaded hooks stay in the registry)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_TIMEOUT_S)
        self._thread = None
        if thread is None or not thread.is_alive():
            self._close_pubsub()

    def load_dir(self, hooks_dir: Path | None = None) -> bool:
        """Load a folder straight from disk (version ``dir:<hash>``); True when swapped."""
        folder = Path(hooks_dir) if hooks_dir is not None else self._hooks_dir
        if folder is None:
            raise BundleError("no hooks folder to load: pass --hooks-dir or push a bundle")
        with self._lock:
            try:
                version = dir_version(folder, max_bytes=self._settings.reload.max_bundle_bytes)
                trust.audit_before_load(folder, version, self._settings)
            except BundleError as exc:
                self._refused(str(exc), version=None)
                return False
            return self._load_folder(folder, version, source="dir")

    def load_version(self, version: str) -> bool:
        """Fetch, verify, materialise and swap in a stored bundle; True when swapped.

        A bundle that cannot be fetched or verified is refused: the current set stays and
        the reason is added to ``problems``.
        """
        client = self._require_client()
        with self._lock:
            if version in (self._version, self._refused_version):
                return False
            try:
                bundle = store.fetch_bundle(client, self._keys, version)
                if self._floor is None:
                    self._floor = trust.floor(self._cache_root, self._verify_key)
                trust.check(bundle, self._verify_key, self._keys.ns, floor=self._floor)
                folder = materialise(bundle, self._cache_root)
                trust.audit_before_load(folder, version, self._settings)
            except BundleError as exc:
                # permanent for this version: do not retry it every second
                self._refused_version = version
                self._refused(f"bundle {version} refused: {exc}", version=version)
                return False
            except OSError as exc:
                self._refused(
                    f"bundle {version} not written to {self._cache_root}: {exc}", version=version
                )
                return False
            except HookBusError as exc:  # Redis trouble: try again at the next check
                log.warning("bundle %s not fetched (%s); will retry", version, exc)
                return False
            swapped = self._load_folder(folder, version, source="bundle", meta=bundle.meta)
            if swapped:
                trust.remember(bundle, self._cache_root, self._verify_key)
                self._floor = max(self._floor or 0, bundle.meta.sequence)
                self._cache_name = folder.name
                keep = max(CACHE_KEEP_MIN, self._settings.reload.bundle_history)
                clean_cache(self._cache_root, keep=keep, in_use=(folder.name,))
            return swapped

    def check_now(self) -> bool:
        """Compare the stamp (and the stamp file) with what runs here; follow if they
        differ. Returns True when a new set was swapped in."""
        client = self._require_client()
        self._last_check = time.monotonic()
        file_changed = self._stamp_file.changed()
        try:
            current = store.current_version(client, self._keys)
        except HookBusError as exc:
            log.warning("cannot read the bundle stamp: %s", exc)
            return False
        if current is not None:
            if current != self._version:
                return self.load_version(current)
            self._forget_refusals()
            return False
        if self._source == "bundle" and self._version is not None:
            # Redis lost the stamp (restarted empty?): keep serving, and put the policy back
            reseed.restore_policy(client, self._keys.ns, self._version, self._guarded)
        if file_changed and self._hooks_dir is not None:
            # A single host with no bundle in Redis: a touched stamp file means "read the
            # hooks folder again".
            log.info("stamp file changed; reloading %s", self._hooks_dir)
            return self.load_dir()
        return False

    # --- loading ----------------------------------------------------------------------

    def _require_client(self) -> redis.Redis:
        if self._client is None:
            raise BundleError("HookHost.start(client) must be called first")
        return self._client

    def _initial_load(self, client: redis.Redis) -> None:
        self._stamp_file.mark_seen()
        try:
            current = store.current_version(client, self._keys)
        except HookBusError as exc:
            log.warning("cannot read the bundle stamp at start (%s); will catch up", exc)
            current = None
        if current is not None and self.load_version(current):
            return
        # the stamp's bundle refused, or no stamp at all (Redis restarted empty?) and no
        # folder to read: the last bundle this worker verified beats no hooks at all
        fallback = current is not None or self._hooks_dir is None
        if self._version is None and fallback and self._serve_last_verified(current):
            if current is None:
                reseed.restore_policy(client, self._keys.ns, self._version or "", self._guarded)
            return
        if self._hooks_dir is not None and self._version is None:
            self.load_dir()
        if self._version is None:
            # a fleet may start before its first `hookbus reload`, or Redis may have lost
            # the stamp: either way requests get the failure policy's degraded answer
            # (guarded kinds denied), never the empty chain's plain allow
            given = (
                "no hooks folder was given"
                if self._hooks_dir is None
                else f"the hooks folder {self._hooks_dir} could not be loaded"
            )
            log.warning(
                "no hooks loaded: Redis names no bundle for namespace %r and %s; requests are "
                "answered by the failure policy (degraded) until `hookbus reload` pushes one",
                self._keys.ns,
                given,
            )

    def _serve_last_verified(self, refused: str | None) -> bool:
        """At start, with the stamp's bundle refused (or no stamp at all): serve the last
        bundle this worker verified (from its private cache) rather than no hooks at all."""
        bundle = trust.last_verified(self._cache_root, self._verify_key, self._keys.ns)
        if bundle is None:
            return False
        try:
            folder = materialise(bundle, self._cache_root)
            trust.audit_before_load(folder, bundle.version, self._settings)
        except (BundleError, OSError) as exc:
            log.warning("the last verified bundle %s cannot be served: %s", bundle.version, exc)
            return False
        if not self._load_folder(folder, bundle.version, source="bundle", meta=bundle.meta):
            return False
        self._floor = bundle.meta.sequence
        why = (
            "Redis names no bundle (restarted empty?)"
            if refused is None
            else f"the stamp names bundle {refused}, which this worker refuses"
        )
        log.warning("%s; serving %s, the last bundle this worker verified", why, bundle.version)
        return True

    def _load_folder(
        self, folder: Path, version: str, *, source: str, meta: BundleMeta | None = None
    ) -> bool:
        """Swap ``folder``'s enabled hooks in as ``version`` (``meta``: the bundle's, for a
        bundle); a swap that would leave out a hook able to decide, while the current set is
        complete, is refused (:mod:`hookbus.workers.reload.swap`)."""
        try:
            swap = swap_folder(
                self._registry,
                folder,
                version,
                catalogue=self._settings.catalogue(),
                relative=source == "bundle",
                keep_complete=self._version is not None and self._complete(),
            )
        except HookBusError as exc:
            self._refused(f"{source} {version} not loaded: {exc}")
            return False
        if swap.refusal is not None:
            if source == "bundle":
                self._refused_version = version  # until the next announcement
            self._refused(f"{source} {version} not loaded: {swap.refusal}", version=version)
            return False
        lacking = sorted({*swap.guarded, *swap.decided})
        if lacking:
            log.warning("%s %s runs without hooks for %s (degraded)", source, version, lacking)
        for problem in swap.problems:
            log.warning("hook problem in %s %s: %s", source, version, problem)
        with self._lock:
            previous = self._version
            self._version = version
            self._source = source
            self._guarded = tuple(meta.guarded_kinds) if meta is not None else ()
            self._hook_count = swap.loaded
            self._problems, self._refusals = swap.problems, []
            self._missing_guards = swap.guarded
            self._missing_kinds = swap.decided
            self._swaps += 1
        log.info(
            "hook set %s -> %s (%d hooks, %d problems)",
            previous,
            version,
            swap.loaded,
            len(swap.problems),
        )
        self._notify()
        return True

    def _complete(self) -> bool:
        """Does the current set run every hook able to decide that it declares?"""
        with self._lock:
            return not (self._missing_guards or self._missing_kinds)

    def _forget_refusals(self) -> None:
        """The stamp names the set that runs here again (a refused reload undone): the
        refusals of the bundle nobody asks for any more are no longer problems."""
        with self._lock:
            if not self._refusals:
                return
            self._problems = [p for p in self._problems if p not in self._refusals]
            self._refusals, self._refused_version = [], None
        self._notify()

    def _refused(self, reason: str, *, version: str | None = None) -> None:
        if self._version is None:
            log.warning("%s; no hooks loaded", reason)
        else:
            log.warning("%s; keeping %s", reason, self._version)
        with self._lock:
            if reason not in self._problems:
                self._problems = [*self._problems, reason]
                self._refusals.append(reason)
            self._last_refusal = {"version": version, "reason": reason, "at_ms": now_ms()}
        self._notify()

    def _notify(self) -> None:
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                log.exception("reload listener %r failed", callback)

    # --- follower thread --------------------------------------------------------------

    def _follow(self) -> None:
        try:
            self._follow_loop()
        finally:
            self._close_pubsub()

    def _follow_loop(self) -> None:
        wait_s = 0.05
        while not self._stop.is_set():
            try:
                if self._pubsub is None:
                    self._pubsub = ReloadSubscriber(
                        self._require_client(),
                        self._keys.reload_channel,
                        self.client_name,
                        self._wake.set,  # a reconnect may have lost messages: compare
                    )
                    self._wake.set()  # (re)subscribed: catch up on what we missed
                if self._pubsub.announced(PUBSUB_WAIT_S):
                    # an explicit announcement (e.g. the same bundle, now signed) is tried
                    # again even if it was refused; the once-a-second poll never retries
                    self._refused_version = None
                    self._wake.set()
                due = time.monotonic() - self._last_check >= STAMP_POLL_INTERVAL_S
                if self._wake.is_set() or due:
                    self._wake.clear()
                    self.check_now()
                wait_s = 0.05
            except CONNECTION_ERRORS as exc:
                log.warning("reload listener lost Redis (%s); retrying in %.2fs", exc, wait_s)
                self._close_pubsub()
                self._stop.wait(wait_s)
                wait_s = min(wait_s * 2, RECONNECT_MAX_WAIT_S)
            except Exception:
                log.exception("reload listener error; continuing")
                self._stop.wait(wait_s)
                wait_s = min(wait_s * 2, RECONNECT_MAX_WAIT_S)

    def _close_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            pubsub.close()
