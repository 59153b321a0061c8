-- Engram schema v1. `{embedding_dim}` is filled in from the configured embedding model the
-- first time the schema is created; later starts compare it with engram_meta.embedding_dim.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE engram_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE banks (
    bank_id    text PRIMARY KEY,
    name       text NOT NULL DEFAULT '',
    mission    text NOT NULL DEFAULT '',
    config     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE documents (
    bank_id      text NOT NULL REFERENCES banks ON DELETE CASCADE,
    document_id  text NOT NULL,
    content      text NOT NULL DEFAULT '',
    content_hash text NOT NULL DEFAULT '',
    context      text NOT NULL DEFAULT '',
    metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
    tags         text[] NOT NULL DEFAULT '{}',
    mentioned_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, document_id)
);

CREATE TABLE chunks (
    bank_id      text NOT NULL,
    chunk_id     text NOT NULL,
    document_id  text NOT NULL,
    chunk_index  integer NOT NULL,
    content      text NOT NULL,
    content_hash text NOT NULL,
    char_start   integer,
    char_end     integer,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, chunk_id),
    FOREIGN KEY (bank_id, document_id) REFERENCES documents ON DELETE CASCADE
);
CREATE INDEX chunks_document ON chunks (bank_id, document_id);

-- Facts (world, experience) and observations share one table so recall searches one index.
CREATE TABLE memory_units (
    id             uuid PRIMARY KEY,
    bank_id        text NOT NULL REFERENCES banks ON DELETE CASCADE,
    document_id    text,
    chunk_id       text,
    fact_type      text NOT NULL CHECK (fact_type IN ('world', 'experience', 'observation')),
    text           text NOT NULL,
    context        text NOT NULL DEFAULT '',
    details        jsonb NOT NULL DEFAULT '{}'::jsonb,  -- who/what/where/when/why
    occurred_start timestamptz,
    occurred_end   timestamptz,
    mentioned_at   timestamptz,
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    tags           text[] NOT NULL DEFAULT '{}',
    proof_count    integer NOT NULL DEFAULT 1,
    source_start   integer,
    source_end     integer,
    embedding      vector({embedding_dim}) NOT NULL,
    token_count    integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (bank_id, document_id) REFERENCES documents ON DELETE CASCADE,
    FOREIGN KEY (bank_id, chunk_id) REFERENCES chunks ON DELETE CASCADE
);
CREATE INDEX memory_units_bank_type ON memory_units (bank_id, fact_type);
CREATE INDEX memory_units_document ON memory_units (bank_id, document_id);
CREATE INDEX memory_units_occurred ON memory_units (bank_id, occurred_start, occurred_end);
CREATE INDEX memory_units_mentioned ON memory_units (bank_id, mentioned_at);
CREATE INDEX memory_units_tags ON memory_units USING gin (tags);
CREATE INDEX memory_units_embedding ON memory_units USING hnsw (embedding vector_cosine_ops);

-- Keyword index for true BM25: per-fact term frequencies, kept by retain in the same
-- transaction as the fact, with per-bank document frequencies and length totals.
CREATE TABLE memory_terms (
    bank_id text NOT NULL,
    term    text NOT NULL,
    unit_id uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    tf      integer NOT NULL,
    PRIMARY KEY (bank_id, term, unit_id)
);
CREATE INDEX memory_terms_unit ON memory_terms (unit_id);

CREATE TABLE bank_term_stats (
    bank_id text NOT NULL,
    term    text NOT NULL,
    df      integer NOT NULL,
    PRIMARY KEY (bank_id, term)
);

CREATE TABLE bank_stats (
    bank_id     text PRIMARY KEY REFERENCES banks ON DELETE CASCADE,
    unit_count  bigint NOT NULL DEFAULT 0,
    total_terms bigint NOT NULL DEFAULT 0
);

CREATE TABLE entities (
    id              uuid PRIMARY KEY,
    bank_id         text NOT NULL REFERENCES banks ON DELETE CASCADE,
    canonical_name  text NOT NULL,
    normalized_name text NOT NULL,
    kind            text NOT NULL DEFAULT 'other',
    aliases         text[] NOT NULL DEFAULT '{}',
    aliases_normalized text[] NOT NULL DEFAULT '{}',
    mention_count   integer NOT NULL DEFAULT 0,
    first_seen      timestamptz,
    last_seen       timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (bank_id, normalized_name)
);
CREATE INDEX entities_name_trgm ON entities USING gin (normalized_name gin_trgm_ops);

CREATE TABLE unit_entities (
    unit_id   uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    entity_id uuid NOT NULL REFERENCES entities ON DELETE CASCADE,
    bank_id   text NOT NULL,
    PRIMARY KEY (unit_id, entity_id)
);
CREATE INDEX unit_entities_entity ON unit_entities (entity_id);

-- Links are stored once per pair (from the newer fact); readers follow both directions.
CREATE TABLE memory_links (
    bank_id   text NOT NULL,
    from_unit uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    to_unit   uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    link_type text NOT NULL CHECK (link_type IN ('semantic', 'temporal', 'entity', 'causal')),
    weight    real NOT NULL,
    PRIMARY KEY (from_unit, to_unit, link_type)
);
CREATE INDEX memory_links_to ON memory_links (to_unit);

-- Operations mirror the Temporal workflows behind async API calls so they can be listed
-- per bank; Temporal stays the source of truth for running state.
CREATE TABLE operations (
    operation_id text PRIMARY KEY,
    bank_id      text NOT NULL,
    kind         text NOT NULL,
    workflow_id  text NOT NULL,
    request_hash text NOT NULL,
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    progress     jsonb NOT NULL DEFAULT '{}'::jsonb,
    result       jsonb,
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operations_bank ON operations (bank_id, created_at DESC);

-- BM25 statistics follow memory_terms through statement-level triggers, so every path that
-- adds or removes facts (retain, document delete, cascades) keeps them exact. Rows are
-- upserted in term order so concurrent retains lock them in the same order.
CREATE FUNCTION engram_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bank_term_stats AS s (bank_id, term, df)
    SELECT bank_id, term, count(*) FROM new_rows GROUP BY bank_id, term ORDER BY bank_id, term
    ON CONFLICT (bank_id, term) DO UPDATE SET df = s.df + EXCLUDED.df;
    RETURN NULL;
END $$;

CREATE FUNCTION engram_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bank_term_stats AS s SET df = s.df - d.n
    FROM (SELECT bank_id, term, count(*) AS n FROM old_rows GROUP BY bank_id, term
          ORDER BY bank_id, term) AS d
    WHERE s.bank_id = d.bank_id AND s.term = d.term;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_terms_added AFTER INSERT ON memory_terms
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION engram_terms_added();
CREATE TRIGGER memory_terms_removed AFTER DELETE ON memory_terms
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION engram_terms_removed();

CREATE FUNCTION engram_units_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bank_stats AS s (bank_id, unit_count, total_terms)
    SELECT bank_id, count(*), sum(token_count) FROM new_rows GROUP BY bank_id ORDER BY bank_id
    ON CONFLICT (bank_id) DO UPDATE
        SET unit_count = s.unit_count + EXCLUDED.unit_count,
            total_terms = s.total_terms + EXCLUDED.total_terms;
    RETURN NULL;
END $$;

CREATE FUNCTION engram_units_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bank_stats AS s SET unit_count = s.unit_count - d.n, total_terms = s.total_terms - d.t
    FROM (SELECT bank_id, count(*) AS n, sum(token_count) AS t FROM old_rows GROUP BY bank_id
          ORDER BY bank_id) AS d
    WHERE s.bank_id = d.bank_id;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_units_added AFTER INSERT ON memory_units
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION engram_units_added();
CREATE TRIGGER memory_units_removed AFTER DELETE ON memory_units
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION engram_units_removed();

-- Retain stages each step's output here, keyed by the deterministic fact id, so activity
-- payloads stay small and a retried step overwrites rather than duplicates. The final upsert
-- moves a document's staged facts into memory_units in one transaction and clears them.
CREATE TABLE staged_facts (
    fact_id      uuid PRIMARY KEY,
    bank_id      text NOT NULL,
    operation_id text NOT NULL,
    document_id  text NOT NULL,
    chunk_id     text NOT NULL,
    fact         jsonb NOT NULL,
    embedding    vector({embedding_dim}),
    entity_ids   uuid[],
    links        jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX staged_facts_document ON staged_facts (bank_id, document_id);
