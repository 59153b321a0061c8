"""Per-bank lifecycle policy: a named preset plus overrides from the bank config.

Presets (the reasoning is in docs/lifecycle.md):
- assistant: a personal assistant's memory of daily conversations. Small talk should fade
  within months, stated preferences and plans survive; decay 0.99/day for a fact of neutral
  importance (an untouched one keeps ~0.74 after 30 days, ~0.40 after 90), archive below 0.1.
- documentation: reference text that does not become less true by not being asked about;
  decay 0.999/day (~0.70 after a year), archive below 0.05, merge duplicates.
- support: tickets and customer conversations, where last quarter's issue rarely matters;
  decay 0.98/day (~0.55 after 30 days), archive below 0.15.

In every preset decay is scaled by importance (`importance_scaled_decay`) and the current
value of an attribute is never archived by decay (`keep_current_values`); see
engine/lifecycle/maintenance.py for the formula and docs/benchmarks.md for the measurement.

Ranking weights are 0 in every preset: LoCoMo recall@10 was measured not to gain from them
(docs/benchmarks.md), so they are opt-in per bank.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from engine.errors import InvalidInput


@dataclass(frozen=True)
class LifecyclePolicy:
    decay_rate: float = 0.99  # strength multiplier per day without access (neutral importance)
    importance_scaled_decay: bool = True  # important facts decay slower, small talk faster
    keep_current_values: bool = True  # never archive the current value of an attribute
    archive_threshold: float = 0.1  # archive active facts whose strength falls below
    merge_duplicates: bool = True
    merge_similarity: float = 0.95  # cosine at or above which two facts may merge
    delete_archived: bool = False  # opt-in: deleting a user's data is never a default
    delete_after_days: int = 180  # archived and not accessed for this long ...
    delete_below_importance: float = 0.2  # ... and less important than this
    reinforce_step: float = 0.2  # strength += step · (1 − strength) per access
    feedback_step: float = 0.15  # importance ± step per explicit feedback
    schedule_cron: str = "17 3 * * *"  # daily
    strength_weight: float = 0.0  # ranking boosts (engine/recall/scoring.py)
    importance_weight: float = 0.0
    recency_weight: float = 0.0

    def validated(self) -> LifecyclePolicy:
        for name in (
            "decay_rate",
            "archive_threshold",
            "merge_similarity",
            "delete_below_importance",
            "reinforce_step",
            "feedback_step",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
                raise InvalidInput(f"lifecycle.{name}", "must be a number from 0 to 1")
        for name in ("strength_weight", "importance_weight", "recency_weight"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= float(value) <= 2.0:
                raise InvalidInput(f"lifecycle.{name}", "must be a number from 0 to 2")
        for name in (
            "importance_scaled_decay",
            "keep_current_values",
            "merge_duplicates",
            "delete_archived",
        ):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"lifecycle.{name}", "must be true or false")
        if not isinstance(self.delete_after_days, int) or self.delete_after_days < 1:
            raise InvalidInput("lifecycle.delete_after_days", "must be a positive integer")
        if len(self.schedule_cron.split()) != 5:
            raise InvalidInput("lifecycle.schedule_cron", "must be a 5-field cron expression")
        return self

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


PRESETS: dict[str, LifecyclePolicy] = {
    "assistant": LifecyclePolicy(),
    "documentation": LifecyclePolicy(decay_rate=0.999, archive_threshold=0.05),
    "support": LifecyclePolicy(decay_rate=0.98, archive_threshold=0.15),
}
DEFAULT_PRESET = "assistant"
_FIELDS = {f.name for f in fields(LifecyclePolicy)}


def resolve_policy(preset: str, overrides: dict[str, Any]) -> LifecyclePolicy:
    """The preset with the bank's overrides applied, validated (a 400 names the field)."""
    if preset not in PRESETS:
        raise InvalidInput("lifecycle_preset", f"must be one of {', '.join(PRESETS)}")
    unknown = sorted(set(overrides) - _FIELDS)
    if unknown:
        raise InvalidInput(f"lifecycle.{unknown[0]}", "is not a lifecycle setting")
    return replace(PRESETS[preset], **overrides).validated()
