"""The official hindsight-client recalls from Engram unchanged, over a real loopback port."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hindsight_client import Hindsight
from support.serve import serve
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from recall.recall_support import NOW, Banks, recall_app


async def test_hindsight_client_recall(
    tmp_path: Path,
    banks: Banks,
    temporal_env: WorkflowEnvironment,
    recall_pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> None:
    app = recall_app(tmp_path, recall_pool, temporal_env, embedder, cpu)
    async with serve(app) as url:
        client = Hindsight(base_url=url, user_agent="engram-tests/1")
        try:
            plain = await client.arecall(banks.main, "Who got a new cat?")
            full = await client.arecall(
                banks.main,
                "When does the orchid greenhouse open?",
                types=["world", "experience"],
                budget="high",
                max_tokens=1000,
                trace=True,
                query_timestamp=NOW,
                include_entities=True,
                include_chunks=True,
                tags=["alpha"],
                tags_match="any_strict",
                min_scores={"semantic": 0.0},
                temporal_window={"start": "2024-01-01T00:00:00Z", "end": "2024-01-31"},
            )
        finally:
            await client.aclose()  # type: ignore[no-untyped-call]
    assert plain.results[0].id == banks.ids["dana"]
    assert plain.results[0].scores is not None and plain.results[0].scores.final is not None
    assert plain.trace is None and plain.chunks is None
    ids = [r.id for r in full.results]
    assert set(ids) == {banks.ids["tag-alpha"], banks.ids["tag-both"]}
    top = full.results[0]
    assert top.id == banks.ids["tag-alpha"]
    assert top.metadata == {"source": "notes", "page": "12"}
    assert top.mentioned_at == "2024-01-05T09:00:00+00:00"
    assert full.trace is not None and "arms" in full.trace
    assert full.chunks is not None and top.chunk_id in full.chunks
