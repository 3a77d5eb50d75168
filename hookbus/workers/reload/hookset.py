"""The hook set a worker runs, and how it follows reloads.

Every worker role (chain, fan-out, RQ) holds its hooks in a :class:`HookHost`: it loads the
current bundle when the stamp names one (else the ``--hooks-dir`` folder) before the worker
serves, then follows reloads: its :class:`~hookbus.workers.reload.follower.ReloadFollower` calls
:meth:`HookHost.check_now` when a reload may have happened. Following a reload means: fetch and
verify the bundle, write its files into a local cache folder keyed by version (executable bits
kept), load the hooks from there, and swap them into the registry with one ``replace_dynamic``
call, so a request runs entirely on the old set or entirely on the new one. Static
(code-registered) hooks are untouched. A hook that does not load here (its ``requires`` unmet,
an import error) is skipped and listed in :meth:`HookHost.info`'s ``problems``, which heartbeats
carry as this worker's ack.

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
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from hookbus.audit.folder import audit_folder
from hookbus.bundles import cache as bundle_cache
from hookbus.bundles import pack as bundle_pack
from hookbus.bundles import signing, stamp
from hookbus.bundles import store as bundle_store
from hookbus.bus.keys import Keys
from hookbus.bus.wire import now_ms
from hookbus.errors import BundleError, HookBusError
from hookbus.hooks.actions import confine
from hookbus.hooks.actions.hook_threads import hooks_at_cap
from hookbus.hooks.actions.sandbox import agent_limits
from hookbus.workers.reload.follower import ReloadFollower

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.manifest import HookManifest
    from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)

#: Cached bundle folders kept on disk beyond the one in use.
CACHE_KEEP_MIN = 5

Listener = Callable[[], object]

#: ``trust`` of a worker without a verify key (heartbeats, ``hookbus status``).
UNSIGNED = "unsigned"
#: Stands for "read ``$HOOKBUS_VERIFY_KEY_FILE``" as the default of ``verify_key``.
FROM_ENV = "env"


def _shown(problem: object, prefix: str) -> str:
    """A load problem as workers report it (bundle paths relative to the bundle)."""
    return str(problem).replace(prefix, "") if prefix else str(problem)


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
        self._cache_root = cache_dir or bundle_cache.default_cache_root(settings)
        self._stamp_file = stamp.stamp_file_path(settings)
        # None: unsigned mode (any bundle in Redis runs; said loudly at start and in info())
        self._verify_key = (
            signing.verify_key_from_env() if isinstance(verify_key, str) else verify_key
        )
        self._key_id = signing.key_id(self._verify_key) if self._verify_key else ""
        self._last_refusal: dict[str, Any] | None = None
        self._cache_name: str | None = None
        self._lock = threading.RLock()
        self._client: redis.Redis | None = None
        self._version: str | None = None
        self._source: str | None = None  # "bundle" | "dir" | None
        self._hook_count = 0
        self._problems: list[str] = []
        #: kinds whose guard could not be built in the current set (see missing_guards())
        self._missing_guards: list[str] = []
        self._stamp_seen: tuple[int, str | None] | None = None
        self._listeners: list[Listener] = []
        self._swaps = 0
        self._refused_version: str | None = None
        self._confinement = "unprobed"
        self._follower = ReloadFollower(
            self._keys.reload_channel,
            settings.namespace,
            check=self.check_now,
            announced=self._announced,
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
        ``trust`` (``"verified:<key id>"`` or ``"unsigned"``), ``refused`` (the last
        bundle this worker refused to run: ``version``, ``reason``, ``at_ms``; or None),
        ``confinement`` (how hooks run here; starts with ``none`` when unconfined) and
        ``hooks_at_cap`` (python hooks whose calls fill their concurrency cap now; only
        while there are some) and ``missing_guards`` (kinds whose guard could not be built
        here; only while there are some)."""
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
        if at_cap:
            info["hooks_at_cap"] = at_cap
        if missing:
            info["missing_guards"] = missing
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
        # every role hosts its hooks here: harden the process and say how hooks are confined
        security = self._settings.security
        self._confinement = confine.start_worker(
            allow_unconfined_agent_hooks=security.allow_unconfined_agent_hooks,
            agent_hook_user=security.agent_hook_user,
            agent_limits=agent_limits(security),
        )
        if self._verify_key is None:
            log.warning("%s", signing.trust_warning("worker"))
        else:
            log.info("bundles must be signed by key %s", self._key_id)
        self._initial_load(client)
        self._follower.start(client)

    def stop(self) -> None:
        """Stop following reloads (the loaded hooks stay in the registry)."""
        self._follower.stop()

    @property
    def client_name(self) -> str:
        """The name of the connection that follows the reload channel (``CLIENT LIST``)."""
        return self._follower.client_name

    def _announced(self) -> None:
        # an explicit announcement (e.g. the same bundle, now signed) is tried again even if
        # it was refused; the once-a-second poll never retries
        self._refused_version = None

    def load_dir(self, hooks_dir: Path | None = None) -> bool:
        """Load a folder straight from disk (version ``dir:<hash>``); True when swapped."""
        folder = Path(hooks_dir) if hooks_dir is not None else self._hooks_dir
        if folder is None:
            raise BundleError("no hooks folder to load: pass --hooks-dir or push a bundle")
        with self._lock:
            try:
                version = bundle_pack.dir_version(
                    folder, max_bytes=self._settings.reload.max_bundle_bytes
                )
                self._check_audit(folder, version)
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
                bundle = bundle_store.fetch_bundle(client, self._keys, version)
                meta = bundle.meta
                signing.check_signature(
                    self._verify_key,
                    self._keys.ns,
                    meta.content_hash,
                    meta.signature,
                    version=version,
                )
                folder = bundle_cache.materialise(bundle, self._cache_root)
                self._check_audit(folder, version)
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
            swapped = self._load_folder(folder, version, source="bundle")
            if swapped:
                self._cache_name = folder.name
                keep = max(CACHE_KEEP_MIN, self._settings.reload.bundle_history)
                bundle_cache.clean_cache(self._cache_root, keep=keep, in_use=(folder.name,))
            return swapped

    def _check_audit(self, folder: Path, version: str) -> None:
        """Run the audit here, on the files about to be loaded: a verdict stored beside the
        bundle is whatever its writer put there. Critical findings refuse the bundle, but
        for those about a hook its build refuses anyway: that hook is left out alone."""
        report = audit_folder(folder, settings=self._settings)
        critical = report.refusing_a_set
        if critical:
            lines = "; ".join(f"{f.rule} {f.file}:{f.line or ''} {f.message}" for f in critical)
            raise BundleError(
                f"the worker's audit found {len(critical)} critical problem(s) in bundle "
                f"{version}: {lines}"
            )

    def check_now(self) -> bool:
        """Compare the stamp (and the stamp file) with what runs here; follow if they
        differ. Returns True when a new set was swapped in."""
        client = self._require_client()
        file_changed = self._stamp_file_changed()
        try:
            current = bundle_store.current_version(client, self._keys)
        except HookBusError as exc:
            log.warning("cannot read the bundle stamp: %s", exc)
            return False
        if current is not None:
            if current != self._version:
                return self.load_version(current)
            return False
        if file_changed and self._hooks_dir is not None:
            # Single-host setup without a bundle in Redis: the stamp file says "reload
            # the folder".
            log.info("stamp file changed; reloading %s", self._hooks_dir)
            return self.load_dir()
        return False

    # --- loading ----------------------------------------------------------------------

    def _require_client(self) -> redis.Redis:
        if self._client is None:
            raise BundleError("HookHost.start(client) must be called first")
        return self._client

    def _initial_load(self, client: redis.Redis) -> None:
        self._stamp_seen = self._read_stamp_file()
        try:
            current = bundle_store.current_version(client, self._keys)
        except HookBusError as exc:
            log.warning("cannot read the bundle stamp at start (%s); will catch up", exc)
            current = None
        if current is not None and self.load_version(current):
            return
        if self._hooks_dir is not None and self._version is None:
            self.load_dir()
        if self._version is None:
            # not an error (a fleet may start before its first `hookbus reload`), but a
            # worker that answers every request with the empty chain must say so
            folder = (
                "no hooks folder was given"
                if self._hooks_dir is None
                else (f"the hooks folder {self._hooks_dir} could not be loaded")
            )
            log.warning(
                "no hooks loaded: no bundle has been pushed to namespace %r and %s; requests "
                "get the empty chain's answer (allow) until `hookbus reload` pushes one",
                self._keys.ns,
                folder,
            )

    def _load_folder(self, folder: Path, version: str, *, source: str) -> bool:
        """Parse ``folder`` and swap its enabled hooks in as ``version``."""
        from hookbus.hooks.loader import LEFT_OUT, guard_kinds_left_out, load_hooks

        try:
            report = load_hooks(folder, catalogue=self._settings.catalogue())
        except HookBusError as exc:
            self._refused(f"{source} {version} not loaded: {exc}")
            return False
        # bundle paths point into the cache: show them relative to the bundle
        prefix = f"{folder}/" if source == "bundle" else ""
        skipped = {m.name for m in report.skipped if m.enabled}
        problems = [
            _shown(p, prefix) + (f" ({LEFT_OUT})" if p.hook in skipped else "")
            for p in report.problems
        ]
        manifests: list[HookManifest] = list(report.enabled)
        try:
            # non-strict: a hook that does not register here is left out and reported
            errors = self._registry.replace_dynamic(manifests, version=version)
        except HookBusError as exc:
            self._refused(f"{source} {version} not loaded: {exc}")
            return False
        problems.extend(f"{e} ({LEFT_OUT})" for e in errors)
        loaded = len(manifests) - len(errors)
        # a hook that cannot be loaded or built here is left out alone; a guard's kinds are
        # named, to be answered closed
        missing = guard_kinds_left_out(
            [*manifests, *report.skipped], [*skipped, *(e.hook_id for e in errors)]
        )
        if missing:
            log.warning("%s %s runs without a guard for: %s", source, version, ", ".join(missing))
        for problem in problems:
            log.warning("hook problem in %s %s: %s", source, version, problem)
        with self._lock:
            previous = self._version
            self._version = version
            self._source = source
            self._hook_count = loaded
            self._problems = problems
            self._missing_guards = missing
            self._swaps += 1
        log.info(
            "hook set %s -> %s (%d hooks, %d problems)",
            previous,
            version,
            len(manifests),
            len(problems),
        )
        self._notify()
        return True

    def _refused(self, reason: str, *, version: str | None = None) -> None:
        if self._version is None:
            log.warning("%s; no hooks loaded", reason)
        else:
            log.warning("%s; keeping %s", reason, self._version)
        with self._lock:
            if reason not in self._problems:
                self._problems = [*self._problems, reason]
            self._last_refusal = {"version": version, "reason": reason, "at_ms": now_ms()}
        self._notify()

    def _notify(self) -> None:
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                log.exception("reload listener %r failed", callback)

    # --- stamp file -------------------------------------------------------------------

    def _read_stamp_file(self) -> tuple[int, str | None] | None:
        if self._stamp_file is None:
            return None
        try:
            return stamp.read_stamp_file(self._stamp_file)
        except OSError as exc:
            log.warning("cannot read %s: %s", self._stamp_file, exc)
            return None

    def _stamp_file_changed(self) -> bool:
        """True once per new stamp file (newer than the last one handled). The file is
        left in place: several workers on one host read it."""
        seen = self._read_stamp_file()
        if seen is None or seen == self._stamp_seen:
            return False
        self._stamp_seen = seen
        return True
