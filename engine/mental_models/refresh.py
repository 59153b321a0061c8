"""Deciding whether a refresh runs, and storing its answer as a new version.

Skip rule (documented in docs/mental-models.md): a refresh runs when it is forced
(`{"mode": "full"}`), when the model has no content yet (new or cleared), for every run of a
report, when evidence it is based on was deleted, or when the *evidence digest* changed. The
digest is a SHA-256 over the questions, the scope (tags, fact types) and the set of
(id, text) pairs that recall finds for each question — the same retrieval reflect starts
from. Order is ignored, so a re-ranking alone never triggers a refresh; a new, edited or
deleted fact or observation that recall ranks for the question does. Other mental models
are not part of the digest, so two models never refresh each other in a loop.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from engine.db import Connection, Pool
from engine.mental_models.payloads import Answer, PlanRequest, RefreshPlan, StoreRequest
from engine.mental_models.store import MentalModel, find_model, get_model
from engine.recall.engine import RecallEngine
from engine.recall.types import RecallRequest
from engine.reflect.payloads import Budget, Evidence
from engine.store.memories import TagsMatch
from engine.types import FactType

MEMORY_KINDS = ("world", "experience", "observation")
# Recall's token budget for the digest when the trigger does not set recall_max_tokens.
DIGEST_RECALL_TOKENS = 4096

Embed = Callable[[str], Awaitable[NDArray[np.float32]]]


async def evidence_digest(recall: RecallEngine, model: MentalModel, now: datetime) -> str:
    trigger = model.trigger
    fact_types = tuple(cast(list[FactType], trigger.get("fact_types") or []))
    tags_match = cast(TagsMatch, trigger.get("tags_match") or "any")
    seen: list[Any] = [model.kind, model.asked, sorted(model.tags), tags_match, list(fact_types)]
    for question in model.asked:
        result = await recall.recall(
            RecallRequest(
                bank_id=model.bank_id,
                query=question,
                types=fact_types,
                budget=cast(Budget, trigger.get("budget") or "mid"),
                max_tokens=int(trigger.get("recall_max_tokens") or DIGEST_RECALL_TOKENS),
                query_timestamp=now,
                tags=tuple(model.tags),
                tags_match=tags_match,
                include_entities=False,
            )
        )
        seen.append(sorted((m.row.id, m.row.text) for m in result.memories))
    raw = json.dumps(seen, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


async def missing_evidence(conn: Connection, model: MentalModel) -> int:
    """How many of the facts, observations and mental models the content rests on are gone."""
    unit_ids = _unit_ids(model.based_on)
    model_ids = [str(e["id"]) for e in model.based_on if e.get("kind") == "mental_model"]
    found_units = await conn.fetchval(
        "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND id = ANY($2::uuid[])",
        model.bank_id,
        unit_ids,
    )
    found_models = await conn.fetchval(
        "SELECT count(*) FROM mental_models WHERE bank_id = $1 AND id = ANY($2::text[])",
        model.bank_id,
        model_ids,
    )
    return len(unit_ids) + len(model_ids) - int(found_units) - int(found_models)


async def plan_refresh(pool: Pool, recall: RecallEngine, request: PlanRequest) -> RefreshPlan:
    async with pool.acquire() as conn:
        model = await find_model(conn, request.bank_id, request.model_id)
        if model is None:
            return RefreshPlan(exists=False, reason="the mental model no longer exists")
        missing = await missing_evidence(conn, model)
    trigger = model.trigger
    base = RefreshPlan(
        exists=True,
        kind=model.kind,
        questions=model.asked,
        budget=cast(Budget, trigger.get("budget") or "mid"),
        max_tokens=model.max_tokens,
        tags=model.tags,
        tags_match=str(trigger.get("tags_match") or "any"),
        fact_types=list(trigger.get("fact_types") or []),
        exclude_mental_models=bool(trigger.get("exclude_mental_models")),
        exclude_mental_model_ids=list(trigger.get("exclude_mental_model_ids") or []),
        response_schema=trigger.get("response_schema"),
        keep_trace=bool(trigger.get("keep_trace")),
    )
    interval = trigger.get("min_refresh_interval_seconds")
    if request.respect_interval and interval and model.last_refreshed_at is not None:
        due = model.last_refreshed_at + timedelta(seconds=int(interval))
        if request.now < due:
            wait = (due - request.now).total_seconds()
            return _with(base, run=False, reason="min_refresh_interval_seconds", wait=wait)
    digest = await evidence_digest(recall, model, request.now)
    if request.force:
        reason = "forced (mode full)"
    elif not model.content:
        reason = "first refresh" if model.version == 0 else "content was cleared"
    elif model.kind == "report":
        reason = "report run"
    elif missing:
        reason = f"{missing} evidence item(s) deleted"
    elif digest != model.evidence_digest:
        reason = "evidence changed"
    else:
        return _with(base, run=False, reason="nothing relevant changed", digest=digest)
    return _with(base, run=True, reason=reason, digest=digest)


def _with(
    plan: RefreshPlan, *, run: bool, reason: str, wait: float = 0.0, digest: str = ""
) -> RefreshPlan:
    values = asdict(plan)
    values.update(run=run, reason=reason, wait_seconds=wait, digest=digest)
    return RefreshPlan(**values)


def _unit_ids(based_on: Sequence[dict[str, Any]]) -> list[str]:
    ids = []
    for item in based_on:
        if item.get("kind") in MEMORY_KINDS:
            try:
                ids.append(str(uuid.UUID(str(item["id"]))))
            except ValueError:
                continue
    return list(dict.fromkeys(ids))


def _evidence_json(evidence: Evidence) -> dict[str, Any]:
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in asdict(evidence).items()
    }


def compose(kind: str, answers: Sequence[Answer]) -> str:
    """A model's content is its answer; a report's is one section per question."""
    if kind != "report":
        return answers[0].output.text if answers else ""
    return "\n\n".join(f"## {a.question}\n\n{a.output.text.strip()}" for a in answers)


def reflect_response(answers: Sequence[Answer], keep_trace: bool) -> dict[str, Any]:
    def one(answer: Answer) -> dict[str, Any]:
        out = answer.output
        return {
            "question": answer.question,
            "text": out.text,
            "based_on": [_evidence_json(e) for e in out.based_on],
            "directives": out.directives,
            "structured_output": out.structured_output,
            "llm_configured": out.llm_configured,
            "usage": {
                "input_tokens": out.usage.input_tokens,
                "output_tokens": out.usage.output_tokens,
                "total_tokens": out.usage.total_tokens,
            },
            "trace": out.trace if keep_trace else None,
        }

    items = [one(a) for a in answers]
    if len(items) == 1:
        return items[0]
    return {"answers": items}


_LOCK = "SELECT version FROM mental_models WHERE bank_id = $1 AND id = $2 FOR UPDATE"
_DONE = (
    "SELECT version FROM mental_model_versions"
    " WHERE bank_id = $1 AND id = $2 AND operation_id = $3 AND operation_id <> ''"
)
_SAVE = """
UPDATE mental_models SET
    content = $3, embedding = $4, based_on = $5, based_on_ids = $6::uuid[],
    reflect_response = $7, version = $8, evidence_digest = $9, last_refreshed_at = $10,
    last_memory_seen_at = (SELECT max(updated_at) FROM memory_units WHERE bank_id = $1),
    last_refresh_error = NULL, updated_at = now()
WHERE bank_id = $1 AND id = $2
"""
_VERSION = """
INSERT INTO mental_model_versions
    (bank_id, id, version, content, based_on, source_query, refreshed_at, reason, operation_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
"""


async def store_refresh(pool: Pool, embed: Embed, request: StoreRequest) -> int:
    """Store the answer as the next version; returns it (0: the model was deleted). A
    retried store of the same operation returns the version it already wrote."""
    async with pool.acquire() as conn:
        model = await find_model(conn, request.bank_id, request.model_id)
    if model is None:
        return 0
    content = compose(model.kind, request.answers)
    vector = await embed(content) if content.strip() else None
    evidence: dict[str, dict[str, Any]] = {}
    for answer in request.answers:
        for item in answer.output.based_on:
            evidence.setdefault(item.id, _evidence_json(item))
    based_on = list(evidence.values())
    response = reflect_response(request.answers, bool(model.trigger.get("keep_trace")))
    async with pool.acquire() as conn, conn.transaction():
        current = await conn.fetchval(_LOCK, request.bank_id, request.model_id)
        if current is None:
            return 0
        done = await conn.fetchval(_DONE, request.bank_id, request.model_id, request.operation_id)
        if done is not None:
            return int(done)
        version = int(current) + 1
        await conn.execute(
            _SAVE,
            request.bank_id,
            request.model_id,
            content,
            vector,
            based_on,
            _unit_ids(based_on),
            response,
            version,
            request.digest,
            request.refreshed_at,
        )
        latest = await get_model(conn, request.bank_id, request.model_id)
        await conn.execute(
            _VERSION,
            request.bank_id,
            request.model_id,
            version,
            content,
            based_on,
            latest.source_query,
            request.refreshed_at,
            request.reason,
            request.operation_id,
        )
    return version


async def record_failure(
    pool: Pool, bank_id: str, model_id: str, error: str, failed_at: datetime
) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE mental_models SET last_refresh_failed_at = $3, last_refresh_error = $4"
            " WHERE bank_id = $1 AND id = $2",
            bank_id,
            model_id,
            failed_at,
            error,
        )
