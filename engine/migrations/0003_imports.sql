-- Bulk imports. The server parses an uploaded file and stages its documents here; the
-- ImportWorkflow then hands out document references only, and each document's workflow
-- loads its own items, so the file never travels through Temporal payloads. Staged rows
-- are removed when the import finishes; the summary (format, counts, record errors) stays.
CREATE TABLE imports (
    operation_id text PRIMARY KEY,
    bank_id      text NOT NULL REFERENCES banks ON DELETE CASCADE,
    formats      text[] NOT NULL,
    documents    integer NOT NULL,
    items        integer NOT NULL,
    error_count  integer NOT NULL DEFAULT 0,
    errors       jsonb NOT NULL DEFAULT '[]'::jsonb,  -- the first errors, {position, message}
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX imports_bank ON imports (bank_id, created_at DESC);

CREATE TABLE import_documents (
    operation_id text NOT NULL REFERENCES imports ON DELETE CASCADE,
    seq          integer NOT NULL,
    document_id  text NOT NULL,
    items        jsonb NOT NULL,  -- [{content, timestamp, context, metadata, tags}]
    records      integer NOT NULL,
    PRIMARY KEY (operation_id, seq)
);
