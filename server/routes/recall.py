"""Recall (`POST .../memories/recall`): served straight from PostgreSQL, no workflow."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.db import Pool
from engine.live_embedder import LiveEmbedder
from engine.recall.types import CandidateRow, RankingBoosts, RecalledMemory, RecallResult
from engine.store.banks import Bank, get_bank
from server.http import iso, json_response, parse_body, path_param, services_of
from server.openapi import ApiRoute
from server.recall_metrics import RecallMetrics
from server.recall_schemas import RecallIn, to_recall_request
from server.responses import RecallResponse
from server.services import Services


def row_item(row: CandidateRow, include_entities: bool) -> dict[str, Any]:
    """A RecallResult without scores: metadata values are strings, entities a list of names,
    times strings."""
    item: dict[str, Any] = {
        "id": row.id,
        "text": row.text,
        "type": row.fact_type,
        "context": row.context,
        "occurred_start": iso(row.occurred_start),
        "occurred_end": iso(row.occurred_end),
        "mentioned_at": iso(row.mentioned_at),
        "document_id": row.document_id,
        "chunk_id": row.chunk_id,
        "metadata": {str(k): v if isinstance(v, str) else str(v) for k, v in row.metadata.items()},
        "tags": row.tags,
    }
    if include_entities:
        item["entities"] = row.entities
    if row.state != "active" or row.valid_to is not None:
        # Shown only for facts that are not plain current ones (docs/lifecycle.md).
        item["state"] = row.state
        item["valid_from"] = iso(row.valid_from)
        item["valid_to"] = iso(row.valid_to)
        item["superseded_by"] = row.superseded_by
    return item


def result_item(
    memory: RecalledMemory, include_entities: bool, sources: dict[str, list[str]]
) -> dict[str, Any]:
    scores = memory.scores
    item = row_item(memory.row, include_entities)
    item["scores"] = {
        "final": scores.final,
        "semantic": scores.semantic,
        "keyword": scores.keyword,
        "reranker": scores.reranker,
        "fused": scores.fused,
        **{arm: value for arm, value in scores.arms.items() if arm != "semantic"},
    }
    if memory.row.id in sources:
        item["source_fact_ids"] = sources[memory.row.id]
    return item


def response_body(result: RecallResult, include_entities: bool) -> dict[str, Any]:
    sources = result.source_fact_ids
    body: dict[str, Any] = {
        "results": [result_item(m, include_entities, sources) for m in result.memories]
    }
    if result.entities is not None:
        body["entities"] = {
            e.canonical_name: {
                "entity_id": e.entity_id,
                "canonical_name": e.canonical_name,
                "observations": [],
            }
            for e in result.entities
        }
    if result.chunks is not None:
        body["chunks"] = {
            c.chunk_id: {
                "id": c.chunk_id,
                "text": c.text,
                "chunk_index": c.chunk_index,
                "truncated": c.truncated,
            }
            for c in result.chunks
        }
    if result.source_facts is not None:
        body["source_facts"] = {r.id: row_item(r, include_entities) for r in result.source_facts}
        body["source_facts_truncated"] = result.source_facts_truncated
    if result.trace is not None:
        body["trace"] = result.trace
    return body


async def recall(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, RecallIn)
    recall_request = to_recall_request(bank_id, body)
    services = services_of(request)
    # The bank check (a 404 for an unknown bank) runs beside the recall, not before it; the
    # bank's ranking weights (its lifecycle policy) are only needed once the candidates are
    # in, so the recall awaits the same read then.
    bank_read = asyncio.ensure_future(_read_bank(services.pool, bank_id))
    boosts = asyncio.ensure_future(_boosts_of(bank_read))
    # Read by the recall, or by nobody when the bank is unknown: retrieved here either way.
    boosts.add_done_callback(lambda f: f.cancelled() or f.exception())
    recalled = asyncio.ensure_future(services.recall.recall(recall_request, boosts=boosts))
    try:
        await bank_read
    except BaseException:
        recalled.cancel()
        boosts.cancel()
        # Its outcome no longer matters; reading it keeps asyncio from logging it.
        recalled.add_done_callback(lambda f: f.cancelled() or f.exception())
        raise
    try:
        result = await recalled
    except Exception as exc:
        # A re-embedding switched the database to a model of another width a moment ago
        # and this process has not followed yet (engine/reembed.py): follow now, then answer.
        if not _is_data_error(exc) or not await _follow_model(services):
            raise
        result = await services.recall.recall(recall_request, boosts=boosts)
    metrics: RecallMetrics | None = getattr(request.app.state, "recall_metrics", None)
    if metrics is not None:
        metrics.observe(recall_request.budget, result)
    return json_response(response_body(result, recall_request.include_entities))


def _is_data_error(exc: Exception) -> bool:
    if isinstance(exc, ExceptionGroup):
        return exc.subgroup(asyncpg.DataError) is not None
    return isinstance(exc, asyncpg.DataError)


async def _follow_model(services: Services) -> bool:
    if not isinstance(services.embedder, LiveEmbedder):
        return False
    async with services.pool.acquire() as conn:
        return await services.embedder.follow(conn)


async def _read_bank(pool: Pool, bank_id: str) -> Bank:
    async with pool.acquire() as conn:
        return await get_bank(conn, bank_id)


async def _boosts_of(bank_read: asyncio.Future[Bank]) -> RankingBoosts:
    policy = (await asyncio.shield(bank_read)).config.lifecycle_policy
    return RankingBoosts(policy.strength_weight, policy.importance_weight, policy.recency_weight)


def routes() -> list[BaseRoute]:
    return [
        ApiRoute(
            "/v1/default/banks/{bank_id}/memories/recall",
            recall,
            methods=["POST"],
            tag="memories",
            summary="Recall memories relevant to a query",
            body=RecallIn,
            response=RecallResponse,
        )
    ]
