-- Facts' vectors in half the bytes (docs/benchmarks.md, "Storage per fact"):
-- * The sentence embedding as float16 (pgvector `halfvec`, 0.7+), the HNSW index over it
--   too: 768 instead of 1,536 bytes in the row and about 1 kB less of index a fact. Cosine
--   over float16 values differs from float32 by ~1e-3 at most for these unit vectors, below
--   what moves a ranking. Queries need no change: a float32 parameter compared with the
--   column takes its type, and pgvector casts `vector` to `halfvec` implicitly, so
--   `embedding <=> $1` uses the halfvec operator and this index.
-- * Token vectors keep the model's last k dimensions, the ones held by the last ⌈P/2⌉ bytes
--   of a row of P = ⌈dim/2⌉ bytes (192-383 of 384; engine/recall/vectors.py, which says why
--   this half): ~2.6 kB less a fact, and most facts' blobs fit one TOAST chunk instead of two
--   or three. In the int4 format (migration 0014) byte i of a row holds dimensions 2i and
--   2i+1 and the row scale is taken over the whole row, so those bytes are exactly what
--   retain now writes: one substring per token row, no per-nibble work. The float16 row
--   scales stay. Blobs whose length is not whole rows of the old format are left as they are.
-- Both columns change in one ALTER TABLE, so the table (heap, TOAST, b-tree indexes) is
-- rewritten once, compact, with no dead rows left behind; the HNSW index is dropped first
-- and built once at the end. An UPDATE of the token vectors instead wrote a second version
-- of every row into every index, HNSW included: cancelled unfinished after 4 minutes on 100k
-- facts, and it leaves a table twice the size until VACUUM FULL. Cost per 100k facts:
-- docs/benchmarks.md. The catalog changes of one ALTER TABLE (types, storage) are made
-- before its rewrite, so the rows are written with the storage set here: the embedding in
-- the row (migration 0021), the token vectors out of line uncompressed (migration 0002).
CREATE FUNCTION pg_temp.engram_half_width(blob bytea, dim integer) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN octet_length(blob) = 0 OR octet_length(blob) % (c.width + 2) <> 0
                THEN blob
                ELSE (SELECT string_agg(substring(blob FROM r * c.width + c.skipped + 1
                                                  FOR c.width - c.skipped),
                                        ''::bytea ORDER BY r)
                      FROM generate_series(0, c.n - 1) AS r)
                     || substring(blob FROM c.n * c.width + 1)
           END
    FROM (SELECT (dim + 1) / 2 AS width, (dim + 1) / 2 - ((dim + 1) / 2 + 1) / 2 AS skipped,
                 octet_length(blob) / ((dim + 1) / 2 + 2) AS n) AS c
$$;

-- A re-embedding run filling beside the live vectors wrote float32 and full-width vectors:
-- they are dropped (the column takes the halfvec type engine/reembed.py now adds it with),
-- and the run fills those facts again.
DO $$
DECLARE
    next_type text;
BEGIN
    SELECT format_type(atttypid, atttypmod) INTO next_type FROM pg_attribute
    WHERE attrelid = 'memory_units'::regclass AND attname = 'embedding_next'
      AND NOT attisdropped;
    IF next_type IS NOT NULL THEN
        DROP INDEX IF EXISTS memory_units_embedding_next;
        EXECUTE format('ALTER TABLE memory_units'
                       ' ALTER COLUMN embedding_next TYPE %s USING NULL,'
                       ' ALTER COLUMN embedding_next SET STORAGE MAIN,'
                       ' ALTER COLUMN token_vectors_next TYPE bytea USING NULL,'
                       ' ALTER COLUMN token_vectors_next SET STORAGE EXTERNAL',
                       replace(next_type, 'vector', 'halfvec'));
    END IF;
END $$;

DROP INDEX IF EXISTS memory_units_embedding;
ALTER TABLE memory_units
    ALTER COLUMN embedding TYPE halfvec({embedding_dim}),
    ALTER COLUMN embedding SET STORAGE MAIN,
    ALTER COLUMN token_vectors TYPE bytea
        USING pg_temp.engram_half_width(token_vectors, {embedding_dim}),
    ALTER COLUMN token_vectors SET STORAGE EXTERNAL;
CREATE INDEX memory_units_embedding ON memory_units USING hnsw (embedding halfvec_cosine_ops);

ALTER TABLE staged_facts
    ALTER COLUMN embedding TYPE halfvec({embedding_dim}),
    ALTER COLUMN token_vectors TYPE bytea
        USING pg_temp.engram_half_width(token_vectors, {embedding_dim});
