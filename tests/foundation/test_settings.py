"""Settings come from the environment, with clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ConfigurationError
from engine.settings import Settings, default_graph_cache_mb


def test_defaults_are_fully_embedded_and_local() -> None:
    settings = Settings.from_env({})
    assert settings.embedded_postgres and settings.embedded_temporal
    assert settings.default_extraction_mode == "local"
    assert settings.home.name == ".engram"


def test_the_token_cache_size_is_read_from_the_environment() -> None:
    assert Settings.from_env({}).recall_token_cache_mb == 256
    assert Settings.from_env({"ENGRAM_RECALL_TOKEN_CACHE_MB": "0"}).recall_token_cache_mb == 0


def test_the_model_dir_is_read_from_the_environment(tmp_path: Path) -> None:
    assert Settings.from_env({}).model_dir is None
    chosen = Settings.from_env({"ENGRAM_MODEL_DIR": str(tmp_path / "models")}).model_dir
    assert chosen == tmp_path / "models"


def test_external_services_and_a_key_switch_modes() -> None:
    settings = Settings.from_env(
        {
            "ENGRAM_DATABASE_URL": "postgresql://u@db/engram",
            "ENGRAM_TEMPORAL_ADDRESS": "tmprl:7233",
            "ENGRAM_LLM_API_KEY": "sk-x",
        }
    )
    assert not settings.embedded_postgres and not settings.embedded_temporal
    assert settings.resolved_temporal_address == "tmprl:7233"
    assert settings.default_extraction_mode == "llm"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ENGRAM_API_PORT": "eighty"}, "ENGRAM_API_PORT must be an integer"),
        ({"ENGRAM_EXTRACTION_MODE": "magic"}, "ENGRAM_EXTRACTION_MODE must be llm, local or none"),
        (
            {"ENGRAM_RECALL_TOKEN_CACHE_MB": "lots"},
            "ENGRAM_RECALL_TOKEN_CACHE_MB must be an integer",
        ),
        ({"ENGRAM_MAX_IN_FLIGHT": "0"}, "ENGRAM_MAX_IN_FLIGHT must be at least 1, got 0"),
        ({"ENGRAM_RECALL_GRAPH_CACHE_MB": "-1"}, "ENGRAM_RECALL_GRAPH_CACHE_MB must be at least 0"),
        ({"ENGRAM_RECALL_TOKEN_CACHE_MB": "-5"}, "ENGRAM_RECALL_TOKEN_CACHE_MB must be at least 0"),
        ({"ENGRAM_API_PORT": "70000"}, "ENGRAM_API_PORT must be at most 65535, got 70000"),
        ({"ENGRAM_WORKER_METRICS_PORT": "-1"}, "ENGRAM_WORKER_METRICS_PORT must be at least 1"),
        ({"ENGRAM_DB_POOL_MAX": "0"}, "ENGRAM_DB_POOL_MAX must be at least 1"),
        ({"ENGRAM_LLM_TIMEOUT": "0"}, "ENGRAM_LLM_TIMEOUT must be at least 1"),
        ({"ENGRAM_MAX_BODY_BYTES": "0"}, "ENGRAM_MAX_BODY_BYTES must be at least 1"),
        ({"ENGRAM_RECALL_MMR_LAMBDA": "1.5"}, "ENGRAM_RECALL_MMR_LAMBDA must be at most 1.0"),
        ({"ENGRAM_RECALL_MMR_LAMBDA": "nan"}, "ENGRAM_RECALL_MMR_LAMBDA must be a number"),
    ],
)
def test_bad_values_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env(env)


def test_bounds_admit_their_edges() -> None:
    settings = Settings.from_env(
        {
            "ENGRAM_RECALL_GRAPH_CACHE_MB": "0",
            "ENGRAM_API_PORT": "65535",
            "ENGRAM_RECALL_MMR_LAMBDA": "1",
            "ENGRAM_MAX_IN_FLIGHT": "1",
        }
    )
    assert settings.recall_graph_cache_mb == 0
    assert settings.api_port == 65535
    assert settings.recall_mmr_lambda == 1.0
    assert settings.max_in_flight == 1


def test_the_graph_cache_defaults_to_a_share_of_the_machine() -> None:
    gib = 2**30
    assert default_graph_cache_mb(1, 4 * gib) == 256  # the floor
    assert default_graph_cache_mb(1, 24 * gib) == 1536
    assert default_graph_cache_mb(2, 24 * gib) == 768  # shared by the server processes
    assert default_graph_cache_mb(1, 256 * gib) == 2048  # the ceiling
    assert default_graph_cache_mb(1, 0) == 256  # memory unknown
    processes = Settings.from_env({"ENGRAM_API_PROCESSES": "2"})
    assert processes.recall_graph_cache_mb == default_graph_cache_mb(2)
    chosen = Settings.from_env({"ENGRAM_RECALL_GRAPH_CACHE_MB": "300"})
    assert chosen.recall_graph_cache_mb == 300
