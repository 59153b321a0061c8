"""One frozen Settings per process, built from the environment in `main()` and passed down."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ConfigurationError

DEFAULT_API_PORT = 8888
DEFAULT_TEMPORAL_PORT = 7233
DEFAULT_TEMPORAL_UI_PORT = 8233
DEFAULT_WORKER_METRICS_PORT = 9091
# API requests one server process works on at once before it answers 503 + Retry-After
# (server/middleware.py). Recall holds a pooled connection for ~0.1 s and a synchronous
# retain waits seconds for its workflow holding none, so 64 keeps the pool (10) and the two
# CPU threads busy without letting a queue grow past what clients wait for.
DEFAULT_MAX_IN_FLIGHT = 64
# The graph cache's default: a sixteenth of the machine's memory shared by the server
# processes, within these bounds (MB). 256 MB holds a bank of ~200,000 facts.
GRAPH_CACHE_FLOOR_MB = 256
GRAPH_CACHE_CEILING_MB = 2048
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


def machine_memory_bytes() -> int:
    """Physical memory, or the container's limit when it is lower; 0 when unknown."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        total = 0
    for path in _CGROUP_LIMITS:
        try:
            raw = path.read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and 0 < int(raw) < (total or int(raw) + 1):
            total = int(raw)
    return max(total, 0)


def default_graph_cache_mb(processes: int = 1, memory_bytes: int | None = None) -> int:
    """A sixteenth of the machine's memory per server process, within the floor and ceiling:
    256 MB on a 4 GB machine, 1.5 GB on 24 GB with one process."""
    memory = machine_memory_bytes() if memory_bytes is None else memory_bytes
    share = memory // 16 // max(processes, 1) // 2**20
    return min(max(share, GRAPH_CACHE_FLOOR_MB), GRAPH_CACHE_CEILING_MB)


def _int(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(f"{name} must be at most {maximum}, got {value}")
    return value


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    return _int(env, name, default, minimum=1, maximum=65535)


def _float(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from exc
    if math.isnan(value):
        raise ConfigurationError(f"{name} must be a number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, got {raw!r}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(f"{name} must be at most {maximum}, got {raw!r}")
    return value


@dataclass(frozen=True)
class LLMSettings:
    """An OpenAI-compatible endpoint. `api_key` empty means no LLM: local paths are used."""

    api_key: str = ""
    base_url: str = ""
    model: str = "gpt-4o-mini"
    timeout_s: float = 60.0

    @property
    def configured(self) -> bool:
        return bool(self.api_key)


LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
# Request bodies above this are refused with 413 before they are read. Imports are the
# largest bodies (a whole chat export as JSON); per-field limits live in engine/limits.py.
DEFAULT_MAX_BODY_BYTES = 64 * 2**20
# Transfer archives uploaded for import (POST .../transfer/import, .../document-transfer)
# have their own limit: a real bank's archive (vectors included) outgrows the body limit.
# Starlette spools the upload to a temporary file past 1 MiB and it is copied into
# PostgreSQL in 1 MiB chunks, so the size costs disk, not memory.
DEFAULT_MAX_ARCHIVE_BYTES = 16 * 2**30


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in env.get(name, "").split(",") if part.strip())


@dataclass(frozen=True)
class SecuritySettings:
    """Who may call the API and how much (docs/security.md).

    `auth`: "keys" requires an API key on every route but health and version; "off" never
    does; "" (the default) is open only while the API is bound to loopback and no key exists.
    """

    auth: str = ""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_archive_bytes: int = DEFAULT_MAX_ARCHIVE_BYTES
    # Requests a minute per key, unless the key has its own (`engram keys create --rate-limit`).
    rate_limit_per_minute: int = 600
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()  # empty: any Host header
    audit_retention_days: int = 90
    # ENGRAM_PAYLOAD_KEY (base64, 32 bytes); empty: `payload.key` in ENGRAM_HOME, made on first use.
    payload_key: str = ""
    payload_previous_keys: tuple[str, ...] = ()  # still decrypt, during a key rotation

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SecuritySettings:
        auth = env.get("ENGRAM_AUTH", "")
        if auth not in ("", "keys", "off"):
            raise ConfigurationError(f"ENGRAM_AUTH must be keys or off, got {auth!r}")
        return cls(
            auth=auth,
            max_body_bytes=_int(env, "ENGRAM_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, minimum=1),
            max_archive_bytes=_int(
                env, "ENGRAM_MAX_ARCHIVE_BYTES", DEFAULT_MAX_ARCHIVE_BYTES, minimum=1
            ),
            rate_limit_per_minute=_int(env, "ENGRAM_RATE_LIMIT_PER_MINUTE", 600, minimum=1),
            cors_origins=_list(env, "ENGRAM_CORS_ORIGINS"),
            allowed_hosts=_list(env, "ENGRAM_ALLOWED_HOSTS"),
            audit_retention_days=_int(env, "ENGRAM_AUDIT_RETENTION_DAYS", 90, minimum=1),
            payload_key=env.get("ENGRAM_PAYLOAD_KEY", ""),
            payload_previous_keys=_list(env, "ENGRAM_PAYLOAD_PREVIOUS_KEYS"),
        )


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str = ""  # empty: the embedded PostgreSQL under `home`
    temporal_address: str = ""  # empty: the embedded Temporal dev server
    temporal_namespace: str = "default"
    task_queue: str = "engram"
    api_host: str = "127.0.0.1"
    api_port: int = DEFAULT_API_PORT
    # Server processes sharing the port (server/processes.py); each has its own pool of
    # db_pool_max connections and its own model. `engram up` picks one per two cores.
    api_processes: int = 1
    temporal_port: int = DEFAULT_TEMPORAL_PORT
    temporal_ui_port: int = DEFAULT_TEMPORAL_UI_PORT
    worker_metrics_port: int = DEFAULT_WORKER_METRICS_PORT
    # Loopback by default; a container sets 0.0.0.0 so Prometheus can scrape the worker.
    worker_metrics_host: str = "127.0.0.1"
    embedding_model: str = "minilm"
    # Where the int8 MiniLM graph derived at install time is cached (engine/quantise.py);
    # None: beside the installation, else the user's cache directory.
    model_dir: Path | None = None
    extraction_mode: str = ""  # empty: "llm" when an LLM key is set, else "local"
    llm: LLMSettings = field(default_factory=LLMSettings)
    db_pool_max: int = 10
    # Recall: `maxsim` (default), `none`, or `onnx:<model.onnx>:<tokenizer.json>` for a
    # cross-encoder; MMR's λ (1 = no diversification). See engine/recall/.
    recall_reranker: str = "maxsim"
    recall_mmr_lambda: float = 0.699
    # Token vectors of recently reranked facts kept in memory (engine/recall/token_cache.py).
    recall_token_cache_mb: int = 256
    # Banks' graphs kept in the server's memory for the graph arm (engine/recall/graph_cache.py;
    # ~1.4 kB a fact, a bank over it stays on the SQL path; 0: off). Default: a sixteenth of
    # the machine's memory per server process, 256-2048 MB.
    recall_graph_cache_mb: int = field(default_factory=default_graph_cache_mb)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT

    @property
    def loopback(self) -> bool:
        return self.api_host in LOOPBACK_HOSTS

    @property
    def default_extraction_mode(self) -> str:
        if self.extraction_mode:
            return self.extraction_mode
        return "llm" if self.llm.configured else "local"

    @property
    def embedded_postgres(self) -> bool:
        return not self.database_url

    @property
    def embedded_temporal(self) -> bool:
        return not self.temporal_address

    @property
    def resolved_temporal_address(self) -> str:
        return self.temporal_address or f"127.0.0.1:{self.temporal_port}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        mode = env.get("ENGRAM_EXTRACTION_MODE", "")
        if mode not in ("", "llm", "local", "none"):
            raise ConfigurationError(
                f"ENGRAM_EXTRACTION_MODE must be llm, local or none, got {mode!r}"
            )
        llm = LLMSettings(
            api_key=env.get("ENGRAM_LLM_API_KEY", env.get("OPENAI_API_KEY", "")),
            base_url=env.get("ENGRAM_LLM_BASE_URL", env.get("OPENAI_BASE_URL", "")),
            model=env.get("ENGRAM_LLM_MODEL", "gpt-4o-mini"),
            timeout_s=float(_int(env, "ENGRAM_LLM_TIMEOUT", 60, minimum=1)),
        )
        api_processes = _int(env, "ENGRAM_API_PROCESSES", 1, minimum=1)
        return cls(
            home=Path(env.get("ENGRAM_HOME", ".engram")).expanduser().absolute(),
            database_url=env.get("ENGRAM_DATABASE_URL", ""),
            temporal_address=env.get("ENGRAM_TEMPORAL_ADDRESS", ""),
            temporal_namespace=env.get("ENGRAM_TEMPORAL_NAMESPACE", "default"),
            task_queue=env.get("ENGRAM_TASK_QUEUE", "engram"),
            api_host=env.get("ENGRAM_API_HOST", "127.0.0.1"),
            api_port=_port(env, "ENGRAM_API_PORT", DEFAULT_API_PORT),
            api_processes=api_processes,
            temporal_port=_port(env, "ENGRAM_TEMPORAL_PORT", DEFAULT_TEMPORAL_PORT),
            temporal_ui_port=_port(env, "ENGRAM_TEMPORAL_UI_PORT", DEFAULT_TEMPORAL_UI_PORT),
            worker_metrics_port=_port(
                env, "ENGRAM_WORKER_METRICS_PORT", DEFAULT_WORKER_METRICS_PORT
            ),
            worker_metrics_host=env.get("ENGRAM_WORKER_METRICS_HOST", "127.0.0.1"),
            embedding_model=env.get("ENGRAM_EMBEDDING_MODEL", "minilm"),
            model_dir=Path(env["ENGRAM_MODEL_DIR"]).expanduser().absolute()
            if env.get("ENGRAM_MODEL_DIR")
            else None,
            extraction_mode=mode,
            llm=llm,
            db_pool_max=_int(env, "ENGRAM_DB_POOL_MAX", 10, minimum=1),
            recall_reranker=env.get("ENGRAM_RERANKER", "maxsim"),
            recall_mmr_lambda=_float(
                env, "ENGRAM_RECALL_MMR_LAMBDA", 0.699, minimum=0.0, maximum=1.0
            ),
            recall_token_cache_mb=_int(env, "ENGRAM_RECALL_TOKEN_CACHE_MB", 256, minimum=0),
            recall_graph_cache_mb=_int(
                env,
                "ENGRAM_RECALL_GRAPH_CACHE_MB",
                default_graph_cache_mb(api_processes),
                minimum=0,
            ),
            security=SecuritySettings.from_env(env),
            max_in_flight=_int(env, "ENGRAM_MAX_IN_FLIGHT", DEFAULT_MAX_IN_FLIGHT, minimum=1),
        )
