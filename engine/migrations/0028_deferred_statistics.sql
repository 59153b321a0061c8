-- The BM25 statistics triggers of memory_units and memory_terms inserts (0001) skip their
-- work while the transaction sets `engram.deferred_statistics` to 'on': the retain upsert
-- (engine/retain/upsert.py) sets it around its fact and term inserts and adds what it
-- inserted to bank_stats and bank_term_stats itself, in two statements just before it
-- commits. Every batch of a bank writes the bank's one bank_stats row and the term rows its
-- facts share (a conversation's speakers); with the triggers the first insert locked them
-- until commit, so concurrent batches of one bank queued through the rest of each other's
-- transaction (term and entity-mention inserts, the lifecycle step, links, entities).
-- Deletes are unchanged; every other writer keeps the triggers.
CREATE OR REPLACE FUNCTION engram_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('engram.deferred_statistics', true) = 'on' THEN
        RETURN NULL;
    END IF;
    INSERT INTO bank_term_stats AS s (bank_id, term, df)
    SELECT bank_id, term, count(*) FROM new_rows GROUP BY bank_id, term ORDER BY bank_id, term
    ON CONFLICT (bank_id, term) DO UPDATE SET df = s.df + EXCLUDED.df;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION engram_units_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('engram.deferred_statistics', true) = 'on' THEN
        RETURN NULL;
    END IF;
    INSERT INTO bank_stats AS s (bank_id, unit_count, total_terms)
    SELECT bank_id, count(*), sum(token_count) FROM new_rows GROUP BY bank_id ORDER BY bank_id
    ON CONFLICT (bank_id) DO UPDATE
        SET unit_count = s.unit_count + EXCLUDED.unit_count,
            total_terms = s.total_terms + EXCLUDED.total_terms;
    RETURN NULL;
END $$;
