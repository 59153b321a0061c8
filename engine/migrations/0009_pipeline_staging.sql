-- The write pipeline's staging (engine/retain/documents.py, claims.py). A retain request's
-- items are stored here before its workflow starts, so workflow inputs, results and
-- heartbeats carry ids and counts only, never memory text (a 960,000-character item or
-- 10,000 items used to exceed Temporal's payload limit). Rows of an operation are removed
-- when it ends, whatever the outcome; older ones are swept (engine/retain/documents.py).
CREATE TABLE retain_documents (
    operation_id text NOT NULL,
    seq          integer NOT NULL,
    bank_id      text NOT NULL,
    document_id  text NOT NULL,
    update_mode  text NOT NULL CHECK (update_mode IN ('replace', 'append')),
    items        jsonb NOT NULL,  -- [{content, timestamp, context, metadata, tags, entities}]
    records      integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (operation_id, seq)
);
CREATE INDEX retain_documents_created ON retain_documents (created_at);

-- A staged document's plan (new chunks with their text, kept and dropped chunk ids), written
-- by the plan step and read by extraction and upsert; `result` is the document's upsert
-- outcome, written in the upsert's transaction, so a retried upsert returns it unchanged.
CREATE TABLE document_plans (
    operation_id text NOT NULL,
    seq          integer NOT NULL,
    bank_id      text NOT NULL,
    document_id  text NOT NULL,
    plan         jsonb NOT NULL,
    result       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (operation_id, seq)
);
CREATE INDEX document_plans_created ON document_plans (created_at);

-- Who writes a document now: one row per (bank, document), taken before the plan step and
-- released in the upsert's transaction. Writers that find it taken queue in
-- document_waiters (oldest first) and are signalled when it is released.
CREATE TABLE document_claims (
    bank_id      text NOT NULL,
    document_id  text NOT NULL,
    operation_id text NOT NULL,
    workflow_id  text NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, document_id)
);
CREATE INDEX document_claims_operation ON document_claims (operation_id);

CREATE TABLE document_waiters (
    bank_id      text NOT NULL,
    document_id  text NOT NULL,
    workflow_id  text NOT NULL,
    operation_id text NOT NULL,
    queued_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (bank_id, document_id, workflow_id)
);
CREATE INDEX document_waiters_operation ON document_waiters (operation_id);

-- Staged facts are removed by operation when it ends, and swept by age.
CREATE INDEX staged_facts_operation ON staged_facts (operation_id);
CREATE INDEX staged_facts_created ON staged_facts (created_at);
