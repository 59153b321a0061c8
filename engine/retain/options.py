"""The one place a bank's configuration becomes the options of a write (retain or import)."""

from __future__ import annotations

from engine.errors import InvalidInput
from engine.retain.payloads import RetainOptions
from engine.settings import Settings
from engine.store.banks import Bank


def extraction_mode(bank: Bank, settings: Settings) -> str:
    mode = bank.config.extraction_mode or settings.default_extraction_mode
    if mode == "llm" and not settings.llm.configured:
        raise InvalidInput(
            "extraction_mode",
            "the bank asks for llm extraction but no LLM key is configured "
            "(set ENGRAM_LLM_API_KEY or choose local)",
        )
    return mode


def retain_options(bank: Bank, settings: Settings) -> RetainOptions:
    config = bank.config
    return RetainOptions(
        extraction_mode=extraction_mode(bank, settings),  # type: ignore[arg-type]
        chunk_size=config.chunk_size,
        retain_mission=config.retain_mission,
        enable_entity_links=config.enable_entity_links,
        enable_semantic_links=config.enable_semantic_links,
        enable_temporal_links=config.enable_temporal_links,
        enable_causal_links=config.enable_causal_links,
        enable_observations=config.enable_observations,
    )
