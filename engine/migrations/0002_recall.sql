-- Recall: compact token vectors for the late-interaction reranker (engine/recall/vectors.py),
-- staged by the embed step and moved with the fact. int8 does not compress, so the column is
-- stored out of line without compression attempts once a row outgrows the page.
ALTER TABLE staged_facts ADD COLUMN token_vectors bytea;
ALTER TABLE memory_units ADD COLUMN token_vectors bytea;
ALTER TABLE memory_units ALTER COLUMN token_vectors SET STORAGE EXTERNAL;

-- The reranker reads each candidate's neighbouring facts of the same chunk (its context).
CREATE INDEX IF NOT EXISTS memory_units_chunk ON memory_units (bank_id, chunk_id);
