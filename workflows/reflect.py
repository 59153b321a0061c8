"""ReflectWorkflow: an agent loop with native tool calls, every step an activity.

Each model turn and each tool execution is an activity, so it is retried by its policy
(`policies.REFLECT_MODEL`, `policies.REFLECT_TOOL`) and recorded in the history; the loop
itself only decides, from what the activities returned. A tool call with an unknown name or
arguments that are not the expected JSON is answered with an error the model can read, and
the loop goes on. The loop ends when the model calls `done`, answers without a tool call, or
hits a limit: the budget's turn cap, the wall-clock limit (workflow time) or the estimated
context size; then one last turn without tools synthesises the answer from the evidence seen.

Without a model the workflow runs the same searches for the question itself and returns that
evidence, with a text saying that no model is configured.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.reflect import ReflectActivities
    from engine.reflect.answer import (
        ITERATIONS,
        cited_ids,
        estimate_tokens,
        no_model_answer,
        rests_on,
        synthesis_prompt,
    )
    from engine.reflect.payloads import Evidence, ReflectInput, ReflectOutput, ReflectUsage
    from engine.reflect.prompt import system_prompt, user_prompt
    from engine.reflect.search import Scope
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
    from engine.reflect.tools import CallError, CheckedCall, check_call, tool_specs
    from engine.store.memories import TagsMatch
    from workflows import policies

TAGS_MATCHES: tuple[TagsMatch, ...] = ("any", "all", "any_strict", "all_strict", "exact")


def reflect_workflow_id(bank_id: str, request_id: str) -> str:
    return f"reflect:{bank_id}:{request_id}"


def _scope(request: ReflectInput) -> Scope:
    tags_match: TagsMatch = "any"
    for mode in TAGS_MATCHES:
        if mode == request.tags_match:
            tags_match = mode
    return Scope(
        bank_id=request.bank_id,
        now=request.now,
        budget=request.budget,
        tags=tuple(request.tags),
        tags_match=tags_match,
        fact_types=tuple(request.fact_types),
        exclude_mental_model_ids=tuple(request.exclude_mental_model_ids),
        max_tokens=request.observations_max_tokens,
    )


@workflow.defn
class ReflectWorkflow:
    def __init__(self) -> None:
        self._usage = ReflectUsage()
        self._llm_calls: list[dict[str, Any]] = []
        self._tool_calls: list[dict[str, Any]] = []
        self._iteration = 0
        self._bank_id: str | None = None
        # What the loop is doing now, for the `steps` query (the console's live view).
        self._stage = "starting"

    @workflow.query
    def progress(self) -> dict[str, int]:
        return {
            "iteration": self._iteration,
            "tool_calls": len(self._tool_calls),
            "llm_calls": len(self._llm_calls),
        }

    @workflow.query
    def steps(self) -> dict[str, Any]:
        """The steps so far, as the answer's trace will list them: read while it runs.
        A query only reads the instance, so adding it changes no running workflow's history."""
        return {
            "stage": self._stage,
            "iteration": self._iteration,
            "tool_calls": list(self._tool_calls),
            "llm_calls": list(self._llm_calls),
        }

    @workflow.run
    async def run(self, request: ReflectInput) -> ReflectOutput:
        # Only labels the model calls' log rows (an activity input: not replayed as a command).
        self._bank_id = request.bank_id
        context: ReflectContext = await workflow.execute_activity_method(
            ReflectActivities.load_reflect_context,
            # Extra fields of the activity's input: replay does not compare them.
            ContextRequest(
                request.bank_id,
                list(request.tags),
                _scope(request).tags_match,
                request.apply_all_directives,
            ),
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.REFLECT_TOOL.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        scope = _scope(request)
        if not context.llm_configured:
            return await self._without_model(request, context, scope)
        answer, ids, seen, stop = await self._loop(request, context, scope)
        if answer is None:
            self._stage = "synthesising"
            answer = await self._synthesise(request, context, list(seen.values()))
            ids = cited_ids(answer)
        self._stage = "structuring" if request.response_schema is not None else "done"
        structured = await self._structure(request, answer)
        self._stage = "done"
        return ReflectOutput(
            text=answer,
            based_on=rests_on(ids, seen),
            directives=[d.content for d in context.directives],
            structured_output=structured.output if structured else None,
            structured_output_error=structured.error if structured else None,
            usage=self._usage,
            llm_configured=True,
            trace=self._trace(request, stop),
        )

    async def _loop(
        self, request: ReflectInput, context: ReflectContext, scope: Scope
    ) -> tuple[str | None, list[str], dict[str, Evidence], str]:
        """The agent turns; returns the answer (None: synthesise), its ids, what was seen
        and why the loop stopped."""
        tools = tool_specs(include_mental_models=not request.exclude_mental_models)
        offered = [spec["function"]["name"] for spec in tools]
        messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": system_prompt(
                    context.mission, context.directives, context.disposition, request.now
                ),
            },
            {"role": "user", "content": user_prompt(request.query, request.context)},
        ]
        seen: dict[str, Evidence] = {}
        started = workflow.now()
        limit = timedelta(seconds=request.wall_clock_limit_s)
        for iteration in range(1, ITERATIONS[request.budget] + 1):
            if workflow.now() - started >= limit:
                return None, [], seen, "wall_clock_limit"
            if estimate_tokens(messages) >= request.context_limit_tokens:
                return None, [], seen, "context_limit"
            self._iteration = iteration
            self._stage = "thinking"
            turn = await self._turn(messages, tools, f"agent_{iteration}", request.max_tokens)
            if not turn.tool_calls:
                if turn.content and turn.content.strip():
                    return turn.content.strip(), cited_ids(turn.content), seen, "answered"
                return None, [], seen, "empty_answer"
            messages.append(turn.as_message())
            for call in turn.tool_calls:
                checked = check_call(call.name, call.arguments, offered)
                if isinstance(checked, CheckedCall) and checked.name == "done":
                    self._record_tool(iteration, call.name, checked.arguments(), None, 0)
                    return checked.answer, checked.ids, seen, "done"
                content = await self._execute(iteration, scope, call, checked, seen)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return None, [], seen, "iteration_limit"

    async def _execute(
        self,
        iteration: int,
        scope: Scope,
        call: ModelToolCall,
        checked: CheckedCall | CallError,
        seen: dict[str, Evidence],
    ) -> str:
        if isinstance(checked, CallError):
            body = {"error": checked.message}
            self._record_tool(iteration, call.name, {"raw_arguments": call.arguments}, body, 0)
            return json.dumps(body)
        self._stage = f"running {checked.name}"
        outcome: ToolOutcome = await workflow.execute_activity_method(
            ReflectActivities.run_reflect_tool,
            ToolRequest(scope, checked),
            start_to_close_timeout=policies.REFLECT_TOOL.start_to_close,
            retry_policy=policies.REFLECT_TOOL.retry,
            heartbeat_timeout=policies.REFLECT_TOOL.heartbeat,
        )
        for item in outcome.evidence:
            seen.setdefault(item.id, item)
        self._record_tool(
            iteration, checked.name, checked.arguments(), outcome.output, outcome.duration_ms
        )
        return outcome.content

    async def _turn(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        scope: str,
        max_tokens: int,
    ) -> Turn:
        turn: Turn = await workflow.execute_activity_method(
            ReflectActivities.reflect_turn,
            TurnRequest(messages, tools, scope, max_tokens, self._bank_id),
            start_to_close_timeout=policies.REFLECT_MODEL.start_to_close,
            retry_policy=policies.REFLECT_MODEL.retry,
            heartbeat_timeout=policies.REFLECT_MODEL.heartbeat,
        )
        self._add_usage(turn.input_tokens, turn.output_tokens)
        self._llm_calls.append({"scope": scope, "duration_ms": turn.duration_ms})
        return turn

    async def _synthesise(
        self, request: ReflectInput, context: ReflectContext, seen: list[Evidence]
    ) -> str:
        """The final turn, without tools, over the evidence gathered (cut to fit)."""
        system = system_prompt(
            context.mission, context.directives, context.disposition, request.now, with_tools=False
        )
        room = max(request.context_limit_tokens - len(system) // 4 - 500, 500)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": synthesis_prompt(request.query, request.context, seen, room),
            },
        ]
        turn = await self._turn(messages, None, "final", request.max_tokens)
        text = (turn.content or "").strip()
        return text or "I could not find an answer in this bank's memories."

    async def _structure(self, request: ReflectInput, answer: str) -> Structured | None:
        if request.response_schema is None:
            return None
        structured: Structured = await workflow.execute_activity_method(
            ReflectActivities.structure_reflect_answer,
            StructureRequest(request.query, answer, request.response_schema, request.bank_id),
            start_to_close_timeout=policies.REFLECT_MODEL.start_to_close,
            retry_policy=policies.REFLECT_MODEL.retry,
            heartbeat_timeout=policies.REFLECT_MODEL.heartbeat,
        )
        self._add_usage(structured.input_tokens, structured.output_tokens)
        if structured.duration_ms:
            self._llm_calls.append(
                {"scope": "structured_output", "duration_ms": structured.duration_ms}
            )
        return structured

    async def _without_model(
        self, request: ReflectInput, context: ReflectContext, scope: Scope
    ) -> ReflectOutput:
        self._stage = "gathering evidence"
        found: EvidenceSet = await workflow.execute_activity_method(
            ReflectActivities.gather_reflect_evidence,
            EvidenceRequest(scope, request.query, not request.exclude_mental_models),
            start_to_close_timeout=policies.REFLECT_TOOL.start_to_close,
            retry_policy=policies.REFLECT_TOOL.retry,
            heartbeat_timeout=policies.REFLECT_TOOL.heartbeat,
        )
        self._stage = "done"
        return ReflectOutput(
            text=no_model_answer(
                request.query, found.mental_models, found.observations, found.facts, found.latest
            ),
            based_on=found.all(),
            directives=[d.content for d in context.directives],
            structured_output_error=(
                "no language model is configured (set ENGRAM_LLM_API_KEY)"
                if request.response_schema is not None
                else None
            ),
            llm_configured=False,
            trace=self._trace(request, "no_model"),
        )

    def _add_usage(self, input_tokens: int, output_tokens: int) -> None:
        self._usage = ReflectUsage(
            self._usage.input_tokens + input_tokens, self._usage.output_tokens + output_tokens
        )

    def _record_tool(
        self,
        iteration: int,
        tool: str,
        arguments: dict[str, Any],
        output: dict[str, Any] | None,
        duration_ms: int,
    ) -> None:
        self._tool_calls.append(
            {
                "tool": tool,
                "input": arguments,
                "output": output,
                "duration_ms": duration_ms,
                "iteration": iteration,
            }
        )

    def _trace(self, request: ReflectInput, stop: str) -> dict[str, Any] | None:
        if not request.include_trace:
            return None
        calls = [
            call if request.include_tool_outputs else {**call, "output": None}
            for call in self._tool_calls
        ]
        return {"tool_calls": calls, "llm_calls": list(self._llm_calls), "stop_reason": stop}
