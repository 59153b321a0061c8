"""Reflect's activities: read the bank's prompt settings, one model turn, one tool call, the
no-model evidence, the structured output. Each takes one payload and returns one."""

from __future__ import annotations

import json
import time
from typing import Any

from temporalio import activity

from engine.db import Pool
from engine.errors import InvalidInput
from engine.llm import LLMClient, LLMOutputError, llm_scope, parse_json_lenient
from engine.reflect.answer import directives_of
from engine.reflect.prompt import Directive
from engine.reflect.schema import schema_errors
from engine.reflect.search import ReflectSearch, evidence_for_model
from engine.reflect.steps import (
    ContextRequest,
    EvidenceRequest,
    EvidenceSet,
    ModelToolCall,
    ReflectContext,
    Structured,
    StructureRequest,
    ToolOutcome,
    ToolRequest,
    Turn,
    TurnRequest,
)
from engine.store.banks import get_bank
from engine.store.directives import standing_directives

STRUCTURE_SYSTEM = (
    "Turn the answer below into one JSON object that follows the given JSON schema. Use only "
    "what the answer says; leave optional fields out rather than invent values."
)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


class ReflectActivities:
    def __init__(self, pool: Pool, search: ReflectSearch, llm: LLMClient | None) -> None:
        self._pool = pool
        self._search = search
        self._llm = llm

    @activity.defn
    async def load_reflect_context(self, request: ContextRequest) -> ReflectContext:
        async with self._pool.acquire() as conn:
            bank = await get_bank(conn, request.bank_id)
            stored = await standing_directives(
                conn,
                request.bank_id,
                request.tags,
                request.tags_match,
                apply_all=request.apply_all_directives,
            )
        return ReflectContext(
            mission=bank.mission,
            directives=[
                *(Directive(d.id, d.name, d.content) for d in stored),
                *directives_of(bank.config.directives),
            ],
            disposition=bank.config.disposition,
            llm_configured=self._llm is not None,
        )

    @activity.defn
    async def reflect_turn(self, request: TurnRequest) -> Turn:
        llm = self._llm
        if llm is None:
            raise InvalidInput("llm", "no LLM is configured (set ENGRAM_LLM_API_KEY)")
        started = time.perf_counter()
        with llm_scope(request.bank_id, "reflect"):
            result = await llm.chat(
                request.messages,  # type: ignore[arg-type]
                request.tools,  # type: ignore[arg-type]
                max_tokens=request.max_tokens,
            )
        return Turn(
            content=result.content,
            tool_calls=[ModelToolCall(c.id, c.name, c.arguments) for c in result.tool_calls],
            input_tokens=result.usage.prompt_tokens,
            output_tokens=result.usage.completion_tokens,
            duration_ms=_ms(started),
        )

    @activity.defn
    async def run_reflect_tool(self, request: ToolRequest) -> ToolOutcome:
        started = time.perf_counter()
        call, scope = request.call, request.scope
        if call.name == "expand":
            expanded = await self._search.expand(scope.bank_id, call.memory_id, call.depth)
            if expanded is None:
                body: dict[str, Any] = {"error": f"no memory with id {call.memory_id!r}"}
            elif not expanded.text:
                body = {
                    "memory_id": call.memory_id,
                    "text": "",
                    "note": f"this memory has no stored {call.depth} text",
                }
            else:
                body = {
                    "memory_id": call.memory_id,
                    call.depth: expanded.text,
                    "truncated": expanded.truncated,
                }
            return ToolOutcome(json.dumps(body, ensure_ascii=False), [], body, _ms(started))
        if call.name == "search_mental_models":
            found = await self._search.mental_models(scope, call.query)
        elif call.name == "search_observations":
            found = await self._search.observations(scope, call.query)
        elif call.name == "recall":
            found = await self._search.facts(scope, call.query)
        else:
            raise InvalidInput("call.name", f"{call.name} is not executed by an activity")
        output = {"results": evidence_for_model(found)}
        return ToolOutcome(json.dumps(output, ensure_ascii=False), found, output, _ms(started))

    @activity.defn
    async def gather_reflect_evidence(self, request: EvidenceRequest) -> EvidenceSet:
        """The no-model answer's evidence: the same three searches, for the question."""
        scope, query = request.scope, request.query
        models = (
            await self._search.mental_models(scope, query) if request.include_mental_models else []
        )
        found = EvidenceSet(
            mental_models=models,
            observations=await self._search.observations(scope, query),
            facts=await self._search.facts(scope, query),
        )
        if found.all():
            return found
        # A broad question ("What do you know about me?") is near no fact: show the latest.
        return EvidenceSet(facts=await self._search.latest(scope), latest=True)

    @activity.defn
    async def structure_reflect_answer(self, request: StructureRequest) -> Structured:
        llm = self._llm
        if llm is None:
            return Structured(None, "no language model is configured (set ENGRAM_LLM_API_KEY)")
        started = time.perf_counter()
        user = f"Question: {request.query}\n\nAnswer:\n{request.answer}"
        with llm_scope(request.bank_id, "reflect"):
            result = await llm.complete_raw(
                STRUCTURE_SYSTEM, user, "reflect_answer", request.response_schema
            )
        usage = result.usage
        try:
            value = parse_json_lenient(result.content or "")
        except LLMOutputError as exc:
            error = f"the model's structured output is not JSON: {exc}"
            return Structured(
                None, error, usage.prompt_tokens, usage.completion_tokens, _ms(started)
            )
        errors = schema_errors(value, request.response_schema)
        if errors or not isinstance(value, dict):
            reason = "; ".join(errors) if errors else "$: expected an object"
            error = f"the model's structured output does not match response_schema: {reason}"
            return Structured(
                None, error, usage.prompt_tokens, usage.completion_tokens, _ms(started)
            )
        return Structured(value, None, usage.prompt_tokens, usage.completion_tokens, _ms(started))
