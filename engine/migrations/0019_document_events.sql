-- Issue 14: a document's history shows every change, not only the writes (Hindsight's
-- DocumentEvent kinds), and a file retained through POST .../files/retain keeps its original.

-- Events beside the writes: a fact of the document edited, invalidated, restored or deleted
-- (fact_id names it when it is one fact), its tags changed, or a consolidation that used its
-- facts (the observations it created and updated). Recorded in the transaction of the
-- change (engine/store/document_history.py).
ALTER TABLE document_versions DROP CONSTRAINT document_versions_kind_check;
ALTER TABLE document_versions ADD CONSTRAINT document_versions_kind_check
    CHECK (kind IN ('retain', 'append', 'reprocess', 'retag', 'fact_edited',
                    'fact_invalidated', 'fact_restored', 'fact_deleted',
                    'observations_cleared', 'consolidation'));
ALTER TABLE document_versions
    ALTER COLUMN items_count SET DEFAULT 0,
    ALTER COLUMN facts_added SET DEFAULT 0,
    ALTER COLUMN facts_removed SET DEFAULT 0,
    ALTER COLUMN chunks_added SET DEFAULT 0,
    ALTER COLUMN chunks_removed SET DEFAULT 0,
    ADD COLUMN fact_id uuid,
    ADD COLUMN observations_created uuid[] NOT NULL DEFAULT '{}',
    ADD COLUMN observations_updated uuid[] NOT NULL DEFAULT '{}',
    ADD COLUMN observations_removed uuid[] NOT NULL DEFAULT '{}';

-- The original bytes of a file-retained document, kept in stored_files (so a database
-- backup carries them) under a key derived from the bank and the bytes' sha256: the same
-- file uploaded twice to a bank is stored once. One original per document.
CREATE TABLE document_files (
    bank_id      text NOT NULL REFERENCES banks ON DELETE CASCADE,
    document_id  text NOT NULL,
    key          text NOT NULL REFERENCES stored_files ON DELETE CASCADE,
    sha256       text NOT NULL,
    PRIMARY KEY (bank_id, document_id)
);
CREATE INDEX document_files_key ON document_files (key);
CREATE INDEX document_files_sha ON document_files (bank_id, sha256);

-- A deleted document takes its original with it, whichever path deletes it (DELETE
-- .../documents/{id}, a forget, a bank clear, a merge import replacing it); the bytes go
-- when no other document of the bank uses them.
CREATE FUNCTION document_files_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM document_files WHERE bank_id = OLD.bank_id AND document_id = OLD.document_id;
    RETURN NULL;
END $$;
CREATE TRIGGER documents_drop_file AFTER DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION document_files_drop();

CREATE FUNCTION stored_files_drop_unused() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM stored_files s WHERE s.key = OLD.key
        AND NOT EXISTS (SELECT 1 FROM document_files f WHERE f.key = OLD.key);
    RETURN NULL;
END $$;
CREATE TRIGGER document_files_drop_unused AFTER DELETE OR UPDATE OF key ON document_files
    FOR EACH ROW EXECUTE FUNCTION stored_files_drop_unused();

-- The items a document was retained as (their sizes in its text, timestamps, contexts,
-- tags, metadata and entity hints), so that a reprocess extracts each item again with its
-- own timestamp (engine/retain/documents.py `stored_items`). '[]' for documents stored
-- before this migration: they are reprocessed as one item.
ALTER TABLE documents ADD COLUMN items jsonb NOT NULL DEFAULT '[]'::jsonb;
