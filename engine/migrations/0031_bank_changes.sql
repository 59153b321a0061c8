-- Which transactions changed what recall's in-process graph cache holds (engine/recall/
-- graph_cache.py): one row per bank and writing transaction, added by the triggers below on
-- every statement that inserts, deletes or updates facts (their state, tags, type, embedding),
-- links, entity mentions, index terms or the bank's statistics. A cache remembers the snapshot
-- it was read in; it is still exact while no row here carries a transaction that snapshot did
-- not see (one index probe per recall, `xid >= the snapshot's xmin`). Rows of different
-- transactions never conflict, so concurrent retains of one bank do not queue on this table.
CREATE TABLE bank_changes (
    bank_id text NOT NULL,
    xid     xid8 NOT NULL DEFAULT pg_current_xact_id(),
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (bank_id, xid)
);

CREATE FUNCTION engram_bank_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bank_changes (bank_id)
    SELECT DISTINCT bank_id FROM changed_rows ORDER BY bank_id
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE FUNCTION engram_unit_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bank_changes (bank_id) VALUES (NEW.bank_id) ON CONFLICT DO NOTHING;
    IF OLD.bank_id <> NEW.bank_id THEN
        INSERT INTO bank_changes (bank_id) VALUES (OLD.bank_id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;

-- Statement-level for inserts and deletes (one insert here per statement, whatever its size);
-- a fact's update only when it changes what the walk reads, so reinforcement, access counts
-- and consolidation marks do not empty the cache. A new embedding is seen through
-- `updated_at`, which every rewrite of a fact sets in its transaction (consolidation,
-- correction; the token-vector cache relies on the same): naming `embedding` here made the
-- trigger depend on the column, which a re-embedding drops and renames (engine/reembed.py),
-- and pg_dump writes a halfvec comparison without its operator's schema, which a restore
-- could not parse. A re-embedding's swap is DDL, seen by no trigger: the server drops its
-- graphs when its embedder follows the swap (server/services.py).
CREATE TRIGGER memory_units_changed_update AFTER UPDATE ON memory_units FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.tags IS DISTINCT FROM NEW.tags
          OR OLD.fact_type IS DISTINCT FROM NEW.fact_type
          OR OLD.updated_at IS DISTINCT FROM NEW.updated_at
          OR OLD.bank_id IS DISTINCT FROM NEW.bank_id)
    EXECUTE FUNCTION engram_unit_changed();

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memory_units', 'memory_links', 'unit_entities', 'entities',
                             'memory_terms', 'bank_term_stats', 'bank_stats'] LOOP
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS changed_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION engram_bank_changed()',
                       t || '_changed_insert', t);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS changed_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION engram_bank_changed()',
                       t || '_changed_delete', t);
        IF t <> 'memory_units' THEN
            EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS changed_rows'
                           ' FOR EACH STATEMENT EXECUTE FUNCTION engram_bank_changed()',
                           t || '_changed_update', t);
        END IF;
    END LOOP;
END $$;
