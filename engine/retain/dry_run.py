"""Dry-run extraction (Hindsight's `POST .../memories/dry-run-extract`): the facts retain
would extract from a text with given options, and the LLM tokens spent; nothing is stored,
resolved, linked or embedded.

It chunks as retain does (engine/chunking/, conversation-aware) and calls the same
extractors (engine/extraction/), each chunk with the speaker its turns name, so the preview
is what the pipeline's extract step would produce for the same text and options.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from engine.chunking import chunk_content
from engine.llm import Usage
from engine.retain.staging import with_hints
from engine.types import ExtractedFact, ItemContext

# Extracts one chunk: its facts and the tokens spent (zero for the local extractor).
ChunkExtract = Callable[[str, ItemContext], Awaitable[tuple[list[ExtractedFact], Usage]]]


@dataclass(frozen=True)
class DryRunResult:
    facts: list[tuple[int, ExtractedFact]]  # with the index of the chunk it came from
    usage: Usage
    chunks: list[tuple[str, int]]  # each chunk's text and how many facts it gave


async def dry_run_extract(
    text: str,
    item: ItemContext,
    chunk_size: int,
    extract: ChunkExtract,
    hints: Sequence[str] = (),
) -> DryRunResult:
    """Chunk `text` and extract every chunk (concurrently), in chunk order."""
    chunks = chunk_content("dry-run", text, chunk_size)
    results = await asyncio.gather(
        *(extract(c.text, replace(item, speaker=c.speaker or item.speaker)) for c in chunks)
    )
    facts = [
        (index, with_hints(fact, hints))
        for index, (found, _) in enumerate(results)
        for fact in found
    ]
    usage = sum((spent for _, spent in results), Usage())
    counts = [(chunk.text, len(found)) for chunk, (found, _) in zip(chunks, results, strict=True)]
    return DryRunResult(facts, usage, counts)


async def as_fact(text: str, item: ItemContext) -> tuple[list[ExtractedFact], Usage]:
    """The `none` extraction mode: the chunk is the fact."""
    return [ExtractedFact(text=text, source_start=0, source_end=len(text))], Usage()
