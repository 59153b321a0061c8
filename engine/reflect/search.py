"""What reflect's tools read: mental models, observations, raw facts, and a fact's source.

The same functions serve the agent's tool calls and the no-model answer, which lists what
they find for the question itself.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from pgvector import Vector

from engine.db import Pool
from engine.embedding import Embedder
from engine.recall.engine import RecallEngine
from engine.recall.types import RecallRequest
from engine.reflect.payloads import Budget, Evidence
from engine.store.memories import TagsMatch, tags_clause
from engine.types import FactType

MENTAL_MODELS_LIMIT = 5
# What one expand call returns at most; a longer document is cut and says so.
EXPAND_MAX_CHARS = 8000
RAW_FACT_TYPES: tuple[FactType, ...] = ("world", "experience")
# Facts shown by a no-model reflect whose question matches nothing.
LATEST_LIMIT = 10


@dataclass(frozen=True)
class Scope:
    """The request's filters, applied to every search."""

    bank_id: str
    now: datetime
    budget: Budget = "mid"
    tags: tuple[str, ...] = ()
    tags_match: TagsMatch = "any"
    fact_types: tuple[str, ...] = ()  # empty: all
    exclude_mental_model_ids: tuple[str, ...] = ()
    max_tokens: int = 2048


@dataclass(frozen=True)
class Expanded:
    memory_id: str
    depth: Literal["chunk", "document"]
    text: str  # empty when the fact has no stored source
    truncated: bool = False
    document_id: str | None = None
    chunk_id: str | None = None


def _mental_models_sql(tags_match: TagsMatch) -> str:
    return f"""
SELECT id, name, content, source_query
FROM mental_models
WHERE bank_id = $1 AND kind = 'model' AND content <> '' AND NOT (id = ANY($3::text[]))
  AND {tags_clause("tags", "$4::text[]", tags_match)}
ORDER BY embedding <=> $2 NULLS LAST, last_refreshed_at DESC NULLS LAST, id
LIMIT $5
"""


_EXPAND = """
SELECT m.document_id, m.chunk_id, c.content AS chunk, d.content AS document
FROM memory_units m
LEFT JOIN chunks c ON c.bank_id = m.bank_id AND c.chunk_id = m.chunk_id
LEFT JOIN documents d ON d.bank_id = m.bank_id AND d.document_id = m.document_id
WHERE m.bank_id = $1 AND m.id = $2
"""


def _latest_sql(tags_match: TagsMatch) -> str:
    """A bank's latest current facts of types $2 by when they happened (or were told), none
    told after $3; $4 tags, $5 rows."""
    return f"""
SELECT m.id::text AS id, m.fact_type AS kind, m.text, m.context, m.occurred_start,
       m.occurred_end, m.mentioned_at, m.document_id, m.chunk_id, m.tags, m.metadata
FROM memory_units m
WHERE m.bank_id = $1 AND m.fact_type = ANY($2::text[]) AND m.state = 'active'
  AND m.valid_to IS NULL AND (m.mentioned_at IS NULL OR m.mentioned_at <= $3)
  AND {tags_clause("m.tags", "$4::text[]", tags_match)}
ORDER BY coalesce(m.occurred_start, m.mentioned_at) DESC NULLS LAST, m.created_at DESC, m.id
LIMIT $5
"""


class ReflectSearch:
    def __init__(self, pool: Pool, embedder: Embedder, cpu: Executor, recall: RecallEngine):
        self._pool = pool
        self._embedder = embedder
        self._cpu = cpu
        self._recall = recall

    async def mental_models(self, scope: Scope, query: str) -> list[Evidence]:
        """The bank's refreshed mental models nearest the query (kind 'model' only)."""
        loop = asyncio.get_running_loop()
        vectors = await loop.run_in_executor(self._cpu, self._embedder.embed, [query])
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                _mental_models_sql(scope.tags_match),
                scope.bank_id,
                Vector(vectors[0]),
                list(scope.exclude_mental_model_ids),
                list(scope.tags),
                MENTAL_MODELS_LIMIT,
            )
        return [
            Evidence(
                id=r["id"],
                kind="mental_model",
                text=r["content"],
                name=r["name"],
                context=r["source_query"],
            )
            for r in rows
        ]

    async def observations(self, scope: Scope, query: str) -> list[Evidence]:
        if scope.fact_types and "observation" not in scope.fact_types:
            return []
        return await self._memories(scope, query, ("observation",))

    async def facts(self, scope: Scope, query: str) -> list[Evidence]:
        types = tuple(t for t in RAW_FACT_TYPES if not scope.fact_types or t in scope.fact_types)
        if not types:
            return []
        return await self._memories(scope, query, types)

    async def latest(self, scope: Scope, limit: int = LATEST_LIMIT) -> list[Evidence]:
        """The bank's latest facts in the scope, whatever the question: what a question that
        matches nothing is shown instead."""
        types = [t for t in RAW_FACT_TYPES if not scope.fact_types or t in scope.fact_types]
        if not types:
            return []
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                _latest_sql(scope.tags_match),
                scope.bank_id,
                types,
                scope.now,
                list(scope.tags),
                limit,
            )
        return [
            Evidence(**{**r, "tags": list(r["tags"]), "metadata": _as_text(r["metadata"])})
            for r in rows
        ]

    async def _memories(
        self, scope: Scope, query: str, types: Sequence[FactType]
    ) -> list[Evidence]:
        result = await self._recall.recall(
            RecallRequest(
                bank_id=scope.bank_id,
                query=query,
                types=tuple(types),
                budget=scope.budget,
                max_tokens=scope.max_tokens,
                query_timestamp=scope.now,
                tags=scope.tags,
                tags_match=scope.tags_match,
                include_entities=False,
            )
        )
        return [
            Evidence(
                id=m.row.id,
                kind=cast(Any, m.row.fact_type),
                text=m.row.text,
                occurred_start=m.row.occurred_start,
                occurred_end=m.row.occurred_end,
                context=m.row.context,
                mentioned_at=m.row.mentioned_at,
                document_id=m.row.document_id,
                chunk_id=m.row.chunk_id,
                tags=list(m.row.tags),
                metadata=_as_text(m.row.metadata),
            )
            for m in result.memories
        ]

    async def expand(
        self, bank_id: str, memory_id: str, depth: Literal["chunk", "document"]
    ) -> Expanded | None:
        """A fact's chunk or document text; None when no such fact exists in the bank."""
        try:
            key = uuid.UUID(memory_id)
        except ValueError:
            return None
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(_EXPAND, bank_id, key)
        if row is None:
            return None
        text = (row["document"] if depth == "document" else row["chunk"]) or ""
        return Expanded(
            memory_id,
            depth,
            text[:EXPAND_MAX_CHARS],
            len(text) > EXPAND_MAX_CHARS,
            row["document_id"],
            row["chunk_id"],
        )


def _as_text(metadata: Mapping[str, Any]) -> dict[str, str]:
    """Metadata values as the API shows them: strings."""
    return {str(k): v if isinstance(v, str) else str(v) for k, v in metadata.items()}


def evidence_for_model(items: Sequence[Evidence]) -> list[dict[str, Any]]:
    """What the model sees of each item: id, kind, text and its date when known."""
    shown: list[dict[str, Any]] = []
    for item in items:
        entry: dict[str, Any] = {"id": item.id, "type": item.kind, "text": item.text}
        if item.name:
            entry["name"] = item.name
        when = item.occurred_start or item.mentioned_at
        if when is not None:
            entry["date"] = when.date().isoformat()
        shown.append(entry)
    return shown
