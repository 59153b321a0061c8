"""A stub ReflectWorkflow, registered under the real one's name (the Temporal-samples way).

It answers from every raw fact of the bank, read by an activity, so a refresh's content and
`based_on` follow the facts deterministically without a model; a question containing
`[fail]` makes it fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from engine.db import Pool
    from engine.reflect.payloads import Evidence, ReflectInput, ReflectOutput

STUB_FACTS = 20


@dataclass(frozen=True)
class StubFacts:
    bank_id: str


class StubReflectActivities:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @activity.defn
    async def stub_reflect_facts(self, request: StubFacts) -> list[Evidence]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id::text AS id, fact_type, text FROM memory_units WHERE bank_id = $1"
                " AND fact_type IN ('world', 'experience') ORDER BY text, id LIMIT $2",
                request.bank_id,
                STUB_FACTS,
            )
        return [Evidence(id=r["id"], kind=r["fact_type"], text=r["text"]) for r in rows]


@workflow.defn(name="ReflectWorkflow")
class StubReflectWorkflow:
    @workflow.run
    async def run(self, request: ReflectInput) -> ReflectOutput:
        if "[fail]" in request.query:
            raise ApplicationError("the model is down", non_retryable=True)
        facts: list[Evidence] = await workflow.execute_activity_method(
            StubReflectActivities.stub_reflect_facts,
            StubFacts(request.bank_id),
            start_to_close_timeout=timedelta(seconds=30),
        )
        listed = "; ".join(f.text for f in facts) or "nothing known"
        excluded = ",".join(request.exclude_mental_model_ids)
        return ReflectOutput(
            text=f"{request.query} -> {listed} [excluded: {excluded}]", based_on=facts
        )
