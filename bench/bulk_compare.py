"""Compare a bank built by the engine's retain steps with the same bank built by the bulk
loader (bench/bulk_load.py): row by row where the rows must be equal, overlap where they are
chosen by a search (links), and bytes per fact per table.

    .venv/bin/python -m bench.recall_million --data-dir /tmp/engine-path --total 3000 \\
        --large 2500 --pool-size 500 --builders 1
    .venv/bin/python -m bench.recall_million --data-dir /tmp/bulk-path --bulk --total 3000 \\
        --large 2500 --pool-size 500
    .venv/bin/python -m bench.bulk_compare /tmp/engine-path /tmp/bulk-path

`--builders 1` keeps the engine path to one document in flight, which is what the loader
reproduces (each document linked against the bank's earlier ones).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Final

import asyncpg

from bench.recall_million import LARGE
from engram.postgres import EmbeddedPostgres

_QUERIES: Final = {
    "units": """
        SELECT id::text, md5(concat_ws('|', document_id, chunk_id, fact_type, text, context,
               details::text, occurred_start, occurred_end, mentioned_at, metadata::text,
               tags::text, source_start, source_end, embedding::text, token_count,
               md5(token_vectors), importance, strength, valid_from, terms_version)) AS v
        FROM memory_units WHERE bank_id = $1""",
    "states": "SELECT id::text, state FROM memory_units WHERE bank_id = $1",
    "terms": "SELECT term || '|' || unit_id || '|' || tf AS v FROM memory_terms WHERE bank_id = $1",
    "mentions": "SELECT unit_id || '|' || entity_id AS v FROM unit_entities WHERE bank_id = $1",
    "entities": """
        SELECT concat_ws('|', id, canonical_name, normalized_name, kind, mention_count,
                         first_seen, last_seen) AS v FROM entities WHERE bank_id = $1""",
    "documents": """
        SELECT concat_ws('|', document_id, md5(content), content_hash, mentioned_at,
                         items::text) AS v FROM documents WHERE bank_id = $1""",
    "chunks": """
        SELECT concat_ws('|', chunk_id, document_id, chunk_index, content_hash, char_start,
                         char_end) AS v FROM chunks WHERE bank_id = $1""",
    "bank_stats": "SELECT unit_count || '|' || total_terms AS v FROM bank_stats WHERE bank_id = $1",
    "term_stats": "SELECT term || '|' || df AS v FROM bank_term_stats WHERE bank_id = $1",
    "links": """
        SELECT from_unit || '|' || to_unit || '|' || link_type AS v, link_type, weight
        FROM memory_links WHERE bank_id = $1""",
}
_SIZES: Final = """
SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i') AND pg_total_relation_size(c.oid) > 65536
"""


async def _read(url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        out: dict[str, Any] = {}
        for name, sql in _QUERIES.items():
            out[name] = [tuple(r.values()) for r in await conn.fetch(sql, LARGE)]
        facts = await conn.fetchval("SELECT count(*) FROM memory_units")
        out["bytes_per_fact"] = {
            r["name"]: round(r["bytes"] / facts) for r in await conn.fetch(_SIZES)
        }
        out["staged_facts_bytes"] = await conn.fetchval(
            "SELECT pg_total_relation_size('staged_facts')"
        )
        return out
    finally:
        await conn.close()


def _snapshot(directory: Path) -> dict[str, Any]:
    postgres = EmbeddedPostgres(directory / "pg", directory / "postgres.log")
    postgres.start()
    try:
        return asyncio.run(_read(postgres.create_database("recall_million")))
    finally:
        postgres.stop()


def compare(engine: dict[str, Any], bulk: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for name in ("units", "terms", "mentions", "entities", "documents", "chunks", "bank_stats"):
        a, b = set(engine[name]), set(bulk[name])
        report[name] = {"engine": len(a), "bulk": len(b), "equal": len(a & b)}
    a, b = set(engine["term_stats"]), set(bulk["term_stats"])
    report["term_stats"] = {"engine": len(a), "bulk": len(b), "equal": len(a & b)}
    states: dict[str, dict[str, int]] = {}
    for side, rows in (("engine", engine["states"]), ("bulk", bulk["states"])):
        for _, state in rows:
            states.setdefault(state, {"engine": 0, "bulk": 0})[side] += 1
    report["states"] = states
    links: dict[str, Any] = {}
    for kind in ("semantic", "temporal", "entity", "causal"):
        mine = {v: w for v, t, w in engine["links"] if t == kind}
        theirs = {v: w for v, t, w in bulk["links"] if t == kind}
        common = mine.keys() & theirs.keys()
        difference = max((abs(mine[k] - theirs[k]) for k in common), default=0)
        links[kind] = {
            "engine": len(mine),
            "bulk": len(theirs),
            "same": len(common),
            "max_weight_difference": round(difference, 4),
        }
    report["links"] = links
    sizes = sorted(
        set(engine["bytes_per_fact"]) | set(bulk["bytes_per_fact"]),
        key=lambda n: -engine["bytes_per_fact"].get(n, 0),
    )
    report["bytes_per_fact"] = {
        n: (engine["bytes_per_fact"].get(n, 0), bulk["bytes_per_fact"].get(n, 0)) for n in sizes
    }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", type=Path, help="data dir built by the retain steps")
    parser.add_argument("bulk", type=Path, help="data dir built by the bulk loader")
    args = parser.parse_args()
    report = compare(_snapshot(args.engine), _snapshot(args.bulk))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
