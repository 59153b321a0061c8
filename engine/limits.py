"""Every size limit of a request, in one place, with why it is what it is.

The server enforces them at the edge (`server/`): a field over its limit is a 422 naming
the field and the limit, a request over a whole-request limit a 413. The workflows and
activities carry whatever these admit (the retain pipeline batches a large request so no
Temporal payload exceeds its 2 MB cap), so raising one is a change to check against them.
Published for clients in docs/wire-format.md; keep the two in step.
"""

from __future__ import annotations

from datetime import UTC, datetime

# --- retain -----------------------------------------------------------------------------
# Items per retain request: the schema's maximum since the first release (Hindsight's clients
# send a conversation at a time; bulk history goes through the import API).
MAX_ITEMS_PER_REQUEST = 10_000
# Characters of one item's content: the schema's maximum since the first release. A document
# of this size chunks into ~1,000 chunks at the default chunk size.
MAX_CONTENT_CHARS = 1_000_000
# Characters of content and context over all items of one request (413 above it). Unchanged
# from the first release; counting the context too closes the hole where a 2,000,000-character
# context rode along with a one-line content. Larger bodies belong to the import API, which
# stages documents in PostgreSQL instead of carrying them through Temporal.
MAX_REQUEST_CHARS = 1_500_000
# Characters of one item's context. The context is copied onto every fact the item yields and
# into every extraction prompt for it, so it multiplies: a 10,000-character context on an item
# of 300 facts is 3 MB of rows. Hindsight's clients send a sentence ("chat with Bob").
MAX_CONTEXT_CHARS = 10_000
# Metadata: string pairs stored as jsonb on every fact of the item (like the context).
MAX_METADATA_ENTRIES = 100
MAX_METADATA_KEY_CHARS = 200
MAX_METADATA_VALUE_CHARS = 2_000
# Tags are matched with GIN indexes and compared in every filtered recall; entity hints are
# names. Both are short labels.
MAX_TAGS = 100
MAX_TAG_CHARS = 200
MAX_ENTITY_HINTS = 100
MAX_ENTITY_HINT_CHARS = 200
# Document ids are primary-key text and part of derived ids: the schema's maximum since the
# first release. Operation ids become part of a Temporal workflow id (1,000 bytes at most).
MAX_DOCUMENT_ID_CHARS = 500
MAX_OPERATION_ID_CHARS = 200

# --- banks, mental models, names --------------------------------------------------------
# A bank id is part of every workflow and schedule id built for it
# ("retain:{bank}:{operation}"; Temporal refuses ids over 1,000 bytes), and of URLs.
MAX_BANK_ID_CHARS = 200
# Display names: a bank's name, a mental model's name (a 5 MB name was accepted before).
MAX_NAME_CHARS = 1_000
# A bank's mission / background / retain mission and each directive end up in prompts.
MAX_MISSION_CHARS = 20_000
MAX_DIRECTIVES = 100
MAX_DIRECTIVE_CHARS = 2_000

# --- recall and reflect -----------------------------------------------------------------
# Hindsight rejects queries over 500 tokens; with recall's estimate of 4 characters a token
# (engine/recall/budget.py) that is 2,000 characters.
MAX_QUERY_CHARS = 2_000
# A report's questions: each runs a reflect of its own at every refresh.
MAX_REPORT_QUESTIONS = 50
MAX_RECALL_TOKENS = 1_000_000

# --- any JSON body ----------------------------------------------------------------------
# No wire-format body nests deeper than ~6 levels; metadata and response schemas a few more.
# Python's JSON parser recurses per level and would raise RecursionError near 1,000.
MAX_JSON_DEPTH = 64
# Integers PostgreSQL's bigint holds; anything larger is never a valid count, limit or id.
MAX_JSON_INT = 2**63 - 1
# Integers stored in PostgreSQL `integer` columns (a directive's priority).
MIN_INT32, MAX_INT32 = -(2**31), 2**31 - 1

# --- dates ------------------------------------------------------------------------------
# Python's datetime holds years 1-9999 (PostgreSQL holds far more). An instant within a day of
# either end can still overflow when moved to another timezone or widened by a day, so the
# accepted range leaves that day out: every arithmetic recall does on a date stays in range.
EARLIEST_INSTANT = datetime(1, 1, 2, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 12, 30, tzinfo=UTC)
