"""A bank's entity names the local extractor should recognise next time (engine/chinese.py).

Only names written in Han characters matter: English names are found by capitalisation, while
a Chinese name jieba does not know is cut into pieces unless the segmenter is told about it.
The most mentioned come first and the list is bounded, so a bank with many entities costs
one indexed read per extraction batch, not a scan of its entities.
"""

from __future__ import annotations

from engine.db import Connection

MAX_KNOWN_NAMES = 5000

_HAN_NAMES = """
SELECT canonical_name FROM entities
WHERE bank_id = $1 AND canonical_name ~ '[一-鿿]'
ORDER BY mention_count DESC, canonical_name
LIMIT $2
"""


async def known_han_names(conn: Connection, bank_id: str) -> frozenset[str]:
    rows = await conn.fetch(_HAN_NAMES, bank_id, MAX_KNOWN_NAMES)
    return frozenset(row["canonical_name"] for row in rows)
