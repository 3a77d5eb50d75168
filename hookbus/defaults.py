"""Named defaults, each with its unit in the name. Config overrides most of them."""

from __future__ import annotations

#: Redis URL used when none is configured and no embedded server is running.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: Namespace of keys when none is configured.
DEFAULT_NAMESPACE = "default"
#: Hooks folder, relative to the working directory.
DEFAULT_HOOKS_DIR = "hooks"
#: Deadline of a blocking request when neither the call nor config sets one, in ms.
DEFAULT_DEADLINE_MS = 250
#: Kinds whose on_timeout defaults to deny: a guard that cannot answer must not allow
#: (the rule: hookbus.bus.policy.failure; the agent CLIs' guard routes are these kinds).
DENY_ON_TIMEOUT_KINDS = ("PreToolUse", "PermissionRequest", "PreModelSwitch")
#: Largest encoded event accepted, in bytes (1 MiB).
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024
#: Approximate MAXLEN of the request stream.
DEFAULT_REQUESTS_MAXLEN = 100_000
#: Approximate MAXLEN of the event log stream.
DEFAULT_EVENTS_MAXLEN = 1_000_000
#: Approximate MAXLEN of the decision log stream.
DEFAULT_DECISIONS_MAXLEN = 100_000
#: How long an unread reply list lives, in seconds.
DEFAULT_REPLY_TTL_S = 30
#: Worker heartbeat interval, in ms.
DEFAULT_HEARTBEAT_INTERVAL_MS = 1_000
#: A worker whose last heartbeat is older than this is dead, in ms.
DEFAULT_WORKER_DEAD_AFTER_MS = 5_000
#: Dead workers are pruned from the heartbeat hash after this long, in ms.
DEFAULT_WORKER_PRUNE_AFTER_MS = 300_000
#: Deliveries after which a request or event goes to the dead-letter stream.
DEFAULT_MAX_DELIVERIES = 5
#: Timeout of a hook action when its manifest sets none, in seconds.
DEFAULT_HOOK_TIMEOUT_S = 10.0
#: Timeout of a hook that is only its fleet-wide rules (one script call each), in seconds.
DEFAULT_RULE_TIMEOUT_S = 0.1
#: Cap on what a shell hook may print on stdout / stderr, in bytes.
DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024
#: Priority of a hook that declares none (lower runs first).
DEFAULT_PRIORITY = 100
#: How long RQ keeps a finished job's result, in seconds (about 7 KB a job: keep it short).
DEFAULT_RQ_RESULT_TTL_S = 300
#: Most events of one hook one fan-out job runs, each in isolation (1: a job per event).
DEFAULT_RQ_PACK_MAX_EVENTS = 200
#: How many old hook bundles are kept for rollback.
DEFAULT_BUNDLE_HISTORY = 20
#: Largest hook bundle accepted by `hookbus reload`, in bytes.
DEFAULT_MAX_BUNDLE_BYTES = 8 * 1024 * 1024
#: Chain worker processes that read each partition's request stream (0: every process).
DEFAULT_READERS_PER_PARTITION = 2
#: How long a process holds a partition's reader slot without renewing it, in ms.
DEFAULT_PARTITION_LEASE_MS = 3_000
#: How long a request parked for an operator waits for a decision, in seconds.
DEFAULT_APPROVAL_WAIT_S = 300
#: Longest wait an approval may declare, in seconds (agent CLIs' hook entries allow 610).
MAX_APPROVAL_WAIT_S = 600
#: How long a decided or expired approval stays readable (who decided, when), in seconds.
DEFAULT_APPROVAL_KEEP_S = 86_400
#: Most requests one agent may have waiting for an operator in a partition.
DEFAULT_MAX_PENDING_APPROVALS_PER_AGENT = 10
#: Resource limits of one sandboxed run of an agent's hook (``security.agent_*``): CPU
#: seconds, address space, processes, the largest file, open files.
DEFAULT_AGENT_CPU_S = 10
DEFAULT_AGENT_MEMORY_MB = 1024
DEFAULT_AGENT_MAX_PROCESSES = 64
DEFAULT_AGENT_MAX_FILE_MB = 16
DEFAULT_AGENT_OPEN_FILES = 256
#: Sizes of a sandboxed run's tmpfs mounts, in MiB: ``/tmp``, the run's copy of its folder at
#: ``/hook``, and ``/dev/shm`` (RAM a run can fill is bounded by these, not by RLIMIT_AS).
DEFAULT_AGENT_TMP_MB = 64
DEFAULT_AGENT_HOOK_MB = 64
DEFAULT_AGENT_SHM_MB = 16
