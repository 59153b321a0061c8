-- Moving data between banks and machines (engine/transfer/, docs/transfer.md).

-- Files the server hands out at GET /v1/default/files/download/{key}: transfer archives an
-- export wrote and archives uploaded for import. Stored in PostgreSQL, in chunks of 1 MiB,
-- so the server and the workers need no shared disk and nothing is held whole in memory.
-- Deleted with their bank.
CREATE TABLE stored_files (
    key          text PRIMARY KEY,
    bank_id      text NOT NULL REFERENCES banks ON DELETE CASCADE,
    filename     text NOT NULL,
    content_type text NOT NULL,
    byte_size    bigint NOT NULL DEFAULT 0,
    complete     boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stored_files_bank ON stored_files (bank_id);

CREATE TABLE stored_file_chunks (
    key  text NOT NULL REFERENCES stored_files ON DELETE CASCADE,
    seq  integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (key, seq)
);
ALTER TABLE stored_file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- An import's position in each archive section: a batch of rows and its new position are
-- committed together, so a retried import resumes where the last commit left it.
CREATE TABLE transfer_progress (
    operation_id text NOT NULL,
    section      text NOT NULL,
    rows_done    bigint NOT NULL DEFAULT 0,
    rows_stored  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (operation_id, section)
);

-- What an import decided for each archived document: its id in the target bank, or NULL
-- when it was skipped (an existing id with document_conflict=skip). Rows of later sections
-- that name a document follow this map.
CREATE TABLE transfer_documents (
    operation_id text NOT NULL,
    source_id    text NOT NULL,
    target_id    text,
    PRIMARY KEY (operation_id, source_id)
);
