-- Issue 14: a document's history (GET .../documents/{id}/history) and reprocessing.

-- One row per write of a document: a retain or import that stored it (kind 'retain'), an
-- append, or a reprocess (POST .../documents/{id}/reprocess), with the document's content
-- hash after the write and what the write changed. Written in the upsert's transaction
-- (engine/store/document_history.py). No foreign key to documents: the history of a
-- deleted document outlives it.
CREATE TABLE document_versions (
    id             bigserial PRIMARY KEY,
    bank_id        text NOT NULL REFERENCES banks ON DELETE CASCADE,
    document_id    text NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('retain', 'append', 'reprocess')),
    operation_id   text NOT NULL,
    content_hash   text NOT NULL,
    items_count    integer NOT NULL,
    facts_added    integer NOT NULL,
    facts_removed  integer NOT NULL,
    chunks_added   integer NOT NULL,
    chunks_removed integer NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_versions_document ON document_versions (bank_id, document_id, id DESC);

-- A staged document may be a reprocess: every chunk is extracted again (engine/retain/plan.py).
ALTER TABLE retain_documents DROP CONSTRAINT retain_documents_update_mode_check;
ALTER TABLE retain_documents ADD CONSTRAINT retain_documents_update_mode_check
    CHECK (update_mode IN ('replace', 'append', 'reprocess'));
