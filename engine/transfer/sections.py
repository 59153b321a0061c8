"""What a transfer archive carries: one JSON Lines section per table slice, in the order an
import must write them (a row's references are written before it).

Rows travel whole, as PostgreSQL's own `to_jsonb` of the row, so every column — embeddings,
token vectors, dates, lifecycle state, consolidation marks — moves without a hand-kept list,
and a column a later migration adds travels too. Export queries bind $1 the bank, $2 the
document ids (NULL: the whole bank), $3 whether observations travel, $4 whether mental models
do (as `p.bank`, `p.docs`, `p.obs`, `p.models`). Derived tables (BM25 statistics, bank_stats)
are rebuilt by their triggers on import; staging, claims, operations and schedules belong to
the machine, not the bank, and stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Group = Literal["config", "data", "history"]

# Every export query binds the same four values, named here so each condition reads them.
_PARAMS = "(SELECT $1::text AS bank, $2::text[] AS docs, $3::bool AS obs, $4::bool AS models) p"

# Columns a re-embedding run (engine/reembed.py) adds while it fills: this machine's work in
# progress, in the new model's dimension, not the bank's data (the target's own run, if any,
# fills the rows an import writes).
_MACHINE = " - 'embedding_next' - 'token_vectors_next'"

# The facts (and, when asked, observations) whose rows travel with them.
_UNITS = """(SELECT u.id FROM memory_units u WHERE u.bank_id = p.bank
    AND (p.docs IS NULL OR u.document_id = ANY(p.docs))
    AND (u.fact_type <> 'observation' OR (p.obs AND p.docs IS NULL)))"""
_BANK = "t.bank_id = p.bank"
_WHOLE = "t.bank_id = p.bank AND p.docs IS NULL"
_DOCS = "t.bank_id = p.bank AND (p.docs IS NULL OR t.document_id = ANY(p.docs))"
_OBSERVED = _WHOLE + " AND p.obs"
ORIGINALS_SECTION = "document_files"
# The archive entry holding the bytes of the original whose sha256 follows.
ORIGINALS_PREFIX = "originals/"
_MODELS = _WHOLE + " AND p.models"
# A fact travels with recall's accesses not yet folded into its row applied
# (engine/lifecycle/access_state.py); the target holds none pending.
_ACCESS = (
    " || coalesce((SELECT jsonb_build_object('strength', 1 - (1 - t.strength) * fa.keep,"
    " 'access_count', t.access_count + fa.accesses,"
    " 'last_accessed_at', greatest(t.last_accessed_at, fa.last_accessed_at))"
    " FROM fact_access fa WHERE fa.bank_id = t.bank_id AND fa.fact_id = t.id), '{}')"
)


@dataclass(frozen=True)
class Section:
    """One slice of one table. `filters` are SQL conditions over the incoming row `r` that
    the target must satisfy (what it references exists); `nulled` columns are written NULL
    (`deferred` ones are set after the whole section, when what they name is there)."""

    name: str
    table: str
    group: Group
    where: str
    extra: str = ""
    filters: tuple[str, ...] = ()
    nulled: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    # uuid-shaped strings inside these jsonb columns are ids of the bank's rows
    id_json: tuple[str, ...] = ()

    def export_sql(self) -> str:
        return (
            f"SELECT (to_jsonb(t){_MACHINE}{self.extra})::text FROM {self.table} t, {_PARAMS}"
            f" WHERE {self.where}"
        )


def _unit_exists(column: str) -> str:
    return f"EXISTS (SELECT 1 FROM memory_units m WHERE m.id = r.{column})"


SECTIONS: tuple[Section, ...] = (
    Section("bank", "banks", "config", _WHOLE),
    Section("directives", "directives", "config", _WHOLE),
    Section("webhooks", "webhooks", "config", _WHOLE),
    # First among the data: what was forgotten is refused by everything after it.
    Section("tombstones", "tombstones", "data", _BANK),
    Section("documents", "documents", "data", _DOCS),
    Section(
        "chunks",
        "chunks",
        "data",
        _DOCS,
        filters=(
            "EXISTS (SELECT 1 FROM documents d"
            " WHERE d.bank_id = r.bank_id AND d.document_id = r.document_id)",
        ),
    ),
    # A file-retained document's original (its bytes travel as `originals/<sha256>` entries
    # beside the sections, engine/transfer/archive.py); stored again under the target's key.
    Section(
        ORIGINALS_SECTION,
        "document_files",
        "data",
        _DOCS + " AND EXISTS (SELECT 1 FROM stored_files s WHERE s.key = t.key AND s.complete)",
        extra=" || (SELECT jsonb_build_object('filename', s.filename, 'content_type',"
        " s.content_type) FROM stored_files s WHERE s.key = t.key)",
        filters=(
            "EXISTS (SELECT 1 FROM documents d"
            " WHERE d.bank_id = r.bank_id AND d.document_id = r.document_id)",
            "EXISTS (SELECT 1 FROM stored_files s WHERE s.key = r.key AND s.complete)",
        ),
    ),
    Section(
        "facts",
        "memory_units",
        "data",
        _DOCS + " AND t.fact_type <> 'observation'",
        # Archives carry whether a fact was consolidated as `consolidated_at` (a column of
        # memory_units until migration 0033): the export's time, or null for a fact still
        # on the backlog.
        extra=" || jsonb_build_object('consolidated_at', CASE WHEN EXISTS (SELECT 1"
        " FROM consolidation_backlog b WHERE b.fact_id = t.id) THEN NULL ELSE now() END)" + _ACCESS,
        filters=(
            "(r.chunk_id IS NULL OR EXISTS (SELECT 1 FROM chunks c"
            " WHERE c.bank_id = r.bank_id AND c.chunk_id = r.chunk_id))",
            "(r.document_id IS NULL OR EXISTS (SELECT 1 FROM documents d"
            " WHERE d.bank_id = r.bank_id AND d.document_id = r.document_id))",
        ),
        deferred=("superseded_by",),
    ),
    Section(
        "observation_units",
        "memory_units",
        "data",
        _OBSERVED + " AND t.fact_type = 'observation'",
        extra=_ACCESS,
        deferred=("superseded_by",),
    ),
    Section(
        "observations", "observations", "data", _OBSERVED, filters=(_unit_exists("observation_id"),)
    ),
    Section(
        "entities",
        "entities",
        "data",
        _BANK
        + " AND (p.docs IS NULL OR t.id IN (SELECT ue.entity_id FROM unit_entities ue"
        + f" WHERE ue.unit_id IN {_UNITS}))",
    ),
    Section(
        "unit_entities",
        "unit_entities",
        "data",
        f"{_BANK} AND t.unit_id IN {_UNITS}",
        extra=" || jsonb_build_object('entity_name',"
        " (SELECT e.normalized_name FROM entities e WHERE e.id = t.entity_id))",
        filters=(_unit_exists("unit_id"), "r.entity_id IS NOT NULL"),
    ),
    Section(
        "memory_terms",
        "memory_terms",
        "data",
        f"{_BANK} AND t.unit_id IN {_UNITS}",
        filters=(_unit_exists("unit_id"),),
    ),
    Section(
        "memory_links",
        "memory_links",
        "data",
        f"{_BANK} AND t.from_unit IN {_UNITS}",
        filters=(_unit_exists("from_unit"), _unit_exists("to_unit")),
    ),
    Section(
        "observation_evidence",
        "observation_evidence",
        "data",
        _OBSERVED,
        filters=(_unit_exists("observation_id"), _unit_exists("fact_id")),
    ),
    Section("observation_history", "observation_history", "data", _OBSERVED),
    Section(
        "memory_versions",
        "memory_versions",
        "data",
        f"{_BANK} AND t.memory_id IN {_UNITS}",
        filters=(_unit_exists("memory_id"),),
    ),
    Section(
        "memory_feedback",
        "memory_feedback",
        "data",
        f"{_BANK} AND t.memory_id IN {_UNITS}",
        filters=(_unit_exists("memory_id"),),
    ),
    Section("consolidation_state", "consolidation_state", "data", _OBSERVED),
    Section(
        "mental_models",
        "mental_models",
        "data",
        _MODELS,
        nulled=("schedule_id",),
        id_json=("based_on", "reflect_response"),
    ),
    Section(
        "mental_model_versions", "mental_model_versions", "data", _MODELS, id_json=("based_on",)
    ),
    Section("audit_logs", "audit_logs", "history", _WHOLE),
    Section("llm_requests", "llm_requests", "history", _WHOLE),
)

BY_NAME = {s.name: s for s in SECTIONS}
# A merge folds documents into an existing bank: these sections and nothing bank-wide.
MERGED = frozenset(
    (
        "tombstones",
        "documents",
        "chunks",
        ORIGINALS_SECTION,
        "facts",
        "entities",
        "unit_entities",
        "memory_terms",
        "memory_links",
        "memory_versions",
        "memory_feedback",
    )
)
