"""`POST .../mental-models/{id}/dry-run-refresh`: what a refresh would write, changing nothing.

It plans the refresh as the workflow does (engine/mental_models/refresh.py, forced), asks each
question through a `ReflectWorkflow` run — the same reflect a refresh runs, with the model's
scope — and composes the candidate content, then reports it against the stored content
instead of storing it. Engram refreshes in full mode only, so the preview is the candidate.
The reflect runs keep their trace: `facts.retrieved` counts what their tool calls returned
and `trace.tool_calls` lists the calls with their outputs.
"""

from __future__ import annotations

import difflib
import time
import uuid
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from temporalio.client import WorkflowFailureError

from engine.errors import NotFound, OperationFailed
from engine.mental_models.payloads import Answer, PlanRequest
from engine.mental_models.refresh import compose, plan_refresh
from engine.mental_models.store import get_model
from engine.reflect.payloads import ReflectInput, ReflectOutput
from engine.reflect.search import evidence_for_model
from server.services import Services
from workflows.errors import error_message
from workflows.reflect import ReflectWorkflow, reflect_workflow_id


def _retrieval(answers: list[Answer]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tool calls the refresh's reflect runs made, in Hindsight's trace shape, and its LLM
    calls. A run without a model gathers its evidence in one search, reported as the call
    `gather_evidence` (its duration is not measured)."""
    calls: list[dict[str, Any]] = []
    llm_calls: list[dict[str, Any]] = []
    for answer in answers:
        trace = answer.output.trace or {}
        llm_calls += trace.get("llm_calls", [])
        for call in trace.get("tool_calls", []):
            output = call.get("output") or {}
            results = output.get("results") if isinstance(output, dict) else None
            calls.append(
                {
                    **call,
                    "reason": None,
                    "result_count": len(results) if isinstance(results, list) else None,
                }
            )
        if not answer.output.llm_configured:
            shown = evidence_for_model(answer.output.based_on)
            calls.append(
                {
                    "tool": "gather_evidence",
                    "reason": "no LLM is configured: one search stands for the agent's tools",
                    "input": {"query": answer.question},
                    "output": {"results": shown},
                    "result_count": len(shown),
                    "duration_ms": 0,
                    "iteration": 1,
                }
            )
    return calls, llm_calls


def _retrieved(calls: list[dict[str, Any]]) -> dict[str, int]:
    """Distinct items the tool calls returned, by type."""
    kinds: dict[str, str] = {}
    for call in calls:
        output = call.get("output")
        results = output.get("results") if isinstance(output, dict) else None
        for item in results if isinstance(results, list) else []:
            if isinstance(item, dict) and "id" in item:
                kinds[str(item["id"])] = str(item.get("type", "unknown"))
    return dict(Counter(kinds.values()))


def _outcome(current: str, candidate: str) -> str:
    if not candidate.strip():
        return "refresh_failed_empty_candidate"
    return "content_unchanged" if candidate == current else "content_written"


async def dry_run_refresh(services: Services, bank_id: str, model_id: str) -> dict[str, Any]:
    started = time.perf_counter()
    now = datetime.now(UTC)
    async with services.pool.acquire() as conn:
        model = await get_model(conn, bank_id, model_id)
    plan = await plan_refresh(
        services.pool, services.recall, PlanRequest(bank_id, model_id, now, force=True)
    )
    if not plan.exists:
        raise NotFound("mental model", model_id)
    excluded = [model_id, *plan.exclude_mental_model_ids]
    answers: list[Answer] = []
    for question in plan.questions:
        run_id = str(uuid.uuid4())
        handle = await services.temporal.start_workflow(
            ReflectWorkflow.run,
            ReflectInput(
                bank_id=bank_id,
                query=question,
                now=now,
                budget=plan.budget,
                max_tokens=plan.max_tokens,
                response_schema=plan.response_schema,
                tags=plan.tags,
                tags_match=plan.tags_match,
                fact_types=plan.fact_types,
                exclude_mental_models=plan.exclude_mental_models,
                exclude_mental_model_ids=excluded,
                include_trace=True,
            ),
            id=reflect_workflow_id(bank_id, run_id),
            task_queue=services.settings.task_queue,
        )
        try:
            output: ReflectOutput = await handle.result()
        except WorkflowFailureError as exc:
            raise OperationFailed(run_id, f"reflect failed: {error_message(exc.cause)}") from exc
        answers.append(Answer(question, output))
    candidate = compose(plan.kind, answers)
    outcome = _outcome(model.content, candidate)
    diff = "".join(
        difflib.unified_diff(
            model.content.splitlines(keepends=True),
            candidate.splitlines(keepends=True),
            "current",
            "preview",
        )
    )
    evidence = [e for a in answers for e in a.output.based_on]
    based_on: dict[str, list[dict[str, Any]]] = {}
    for e in evidence:
        item = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(e).items()}
        based_on.setdefault(e.kind, []).append(item)
    used = dict(Counter(e.kind for e in evidence))
    tool_calls, llm_calls = _retrieval(answers)
    tokens_in = sum(a.output.usage.input_tokens for a in answers)
    tokens_out = sum(a.output.usage.output_tokens for a in answers)
    usage = {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
        "cached_tokens": 0,
        "thoughts_tokens": 0,
    }
    duration = int((time.perf_counter() - started) * 1000)
    warnings = [
        "no LLM is configured: the candidate lists the evidence instead of a synthesis"
        for a in answers[:1]
        if not a.output.llm_configured
    ]
    return {
        "mental_model_id": model.id,
        "name": model.name,
        "requested_mode": "full",
        "effective_mode": "full",
        "mode_fallback_reason": None,
        "outcome": outcome,
        "would_persist": outcome == "content_written",
        "scope": {
            "tags": plan.tags,
            "tags_match": plan.tags_match,
            "tag_groups": None,
            "fact_types": plan.fact_types or None,
            "exclude_mental_models": plan.exclude_mental_models,
            "exclude_mental_model_ids": excluded,
        },
        "window": {
            "created_after": None,
            "created_before": now.isoformat(),
            "watermark": model.last_memory_seen_at.isoformat()
            if model.last_memory_seen_at
            else None,
        },
        "facts": {"retrieved": _retrieved(tool_calls), "used": used},
        "based_on": based_on,
        "current_content": model.content,
        "candidate_content": candidate,
        "preview_content": candidate,
        "diff": diff,
        "delta_operations": None,
        "retraction": None,
        "trace": {
            "recorded_at": datetime.now(UTC).isoformat(),
            "effective_mode": "full",
            "mode_fallback_reason": None,
            "outcome": outcome,
            "tool_calls": tool_calls,
            "llm_calls": llm_calls,
            "usage": usage,
            "duration_ms": duration,
            "warnings": warnings,
        },
        "usage": usage,
        "duration_ms": duration,
        "warnings": warnings,
    }
