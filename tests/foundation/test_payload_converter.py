"""Temporal makes a payload converter for every workflow run; Engram's shares one pydantic
adapter per payload type across them, so a run's first activation does not rebuild every
validator (which, on a loaded host, tripped the SDK's 2 s deadlock detector)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.retain.payloads import PlanResult, StagedFacts
from workflows.converter import PayloadConverter, _adapter


@dataclass(frozen=True)
class LocalRecord:  # stands for a type defined inside a sandboxed workflow module
    name: str


def test_runs_share_adapters_of_engine_types_and_round_trip_them() -> None:
    _adapter.cache_clear()  # other tests' workflows have filled it
    staged = StagedFacts("bank", "op", ["a", "b"], priority=3)
    plan = PlanResult(planned=[], failed=[])
    first, second = PayloadConverter(), PayloadConverter()
    [staged_payload, plan_payload] = first.to_payloads([staged, plan])

    assert first.from_payloads([staged_payload], [StagedFacts]) == [staged]
    built = _adapter.cache_info().currsize
    hits = _adapter.cache_info().hits
    assert second.from_payloads([staged_payload], [StagedFacts]) == [staged]
    assert second.from_payloads([plan_payload], [PlanResult]) == [plan]
    assert _adapter.cache_info().hits == hits + 1  # the second run reused StagedFacts'
    assert _adapter.cache_info().currsize == built + 1  # and built PlanResult's once
    [plans] = first.to_payloads([[plan]])
    size = _adapter.cache_info().currsize
    assert second.from_payloads([plans], [list[PlanResult] | None]) == [[plan]]  # type: ignore[list-item]
    assert _adapter.cache_info().currsize == size + 1  # generics of shared types are shared


def test_types_outside_the_passed_through_packages_are_not_kept() -> None:
    record = LocalRecord("x")
    converter = PayloadConverter()
    [payload] = converter.to_payloads([record])
    size = _adapter.cache_info().currsize
    assert converter.from_payloads([payload], [LocalRecord]) == [record]
    [mapping] = converter.to_payloads([{"k": record}])
    assert converter.from_payloads([mapping], [dict[str, LocalRecord]]) == [{"k": record}]
    assert _adapter.cache_info().currsize == size
