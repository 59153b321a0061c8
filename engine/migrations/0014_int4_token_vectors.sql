-- Token vectors int8 -> int4 (engine/recall/vectors.py): half the bytes of the largest thing
-- stored per fact (~8.2 of ~22 kB at 100k facts, docs/benchmarks.md "Storage per fact").
-- Each int8 code v becomes v >> 4, its high nibble, two codes per byte; the float16 row scales
-- stay as they are (the int4 format decodes a code c as 16 · scale · (c + 1/2)). In hex a
-- byte's high nibble is its first digit, so keeping every other digit of the codes and
-- decoding the result packs the nibbles: the conversion runs inside PostgreSQL, row by row.
-- A model of odd dimension would straddle rows; its facts lose their token vectors (the
-- reranker then scores them with their sentence vector) and are reranked as before token
-- vectors existed. Blobs whose length is not whole int8 rows are left alone.
UPDATE memory_units
SET token_vectors = CASE WHEN {embedding_dim} % 2 = 0 THEN
        decode(regexp_replace(encode(substring(token_vectors FROM 1 FOR
                   octet_length(token_vectors) / ({embedding_dim} + 2) * {embedding_dim}),
               'hex'), '(.).', '\1', 'g'), 'hex')
        || substring(token_vectors FROM
               octet_length(token_vectors) / ({embedding_dim} + 2) * {embedding_dim} + 1)
    END
WHERE octet_length(token_vectors) > 0 AND octet_length(token_vectors) % ({embedding_dim} + 2) = 0;

UPDATE staged_facts
SET token_vectors = CASE WHEN {embedding_dim} % 2 = 0 THEN
        decode(regexp_replace(encode(substring(token_vectors FROM 1 FOR
                   octet_length(token_vectors) / ({embedding_dim} + 2) * {embedding_dim}),
               'hex'), '(.).', '\1', 'g'), 'hex')
        || substring(token_vectors FROM
               octet_length(token_vectors) / ({embedding_dim} + 2) * {embedding_dim} + 1)
    END
WHERE octet_length(token_vectors) > 0 AND octet_length(token_vectors) % ({embedding_dim} + 2) = 0;

-- A re-embedding run (engine/reembed.py) filling beside the live vectors wrote its next token
-- vectors as int8, in the next model's width: they are dropped, with their sentence vectors,
-- so the run fills those facts again in the new format.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
               WHERE table_name = 'memory_units' AND column_name = 'token_vectors_next') THEN
        EXECUTE 'UPDATE memory_units SET embedding_next = NULL, token_vectors_next = NULL'
                ' WHERE token_vectors_next IS NOT NULL';
    END IF;
END $$;
