-- The consolidation backlog as a table of its own: a fact waits while it has a row here, and
-- consolidation takes it off by deleting the row, in the transaction that applied its effects
-- (a crash never skips or repeats a fact). Until now a fact waited while
-- memory_units.consolidated_at was NULL, and that column was in the predicate of the backlog's
-- partial index, so marking a fact consolidated could never be a HOT update: it wrote a new
-- version of the row and new entries in every index of memory_units, the HNSW graph included
-- (54-95 ms a batch of 64 at 100,000 facts, docs/benchmarks.md, and a dead copy of each
-- consolidated fact in the graph until VACUUM). A delete here touches this small table only.
CREATE TABLE consolidation_backlog (
    fact_id  uuid PRIMARY KEY REFERENCES memory_units ON DELETE CASCADE,
    bank_id  text NOT NULL,
    -- the order a bank's backlog is taken in: when the fact happened (or was said, or stored)
    event_at timestamptz NOT NULL
);
CREATE INDEX consolidation_backlog_order ON consolidation_backlog (bank_id, event_at, fact_id);

-- Every stored fact (not an observation) joins the backlog, whichever path inserted it
-- (retain, import, restore, correction of a document): one statement per insert statement.
CREATE FUNCTION engram_backlog_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO consolidation_backlog (fact_id, bank_id, event_at)
    SELECT id, bank_id, coalesce(occurred_start, mentioned_at, created_at) FROM new_rows
    WHERE fact_type <> 'observation'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_units_backlog_insert AFTER INSERT ON memory_units
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION engram_backlog_added();

-- A waiting fact whose time is corrected keeps its place in event order.
CREATE FUNCTION engram_backlog_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE consolidation_backlog
    SET event_at = coalesce(NEW.occurred_start, NEW.mentioned_at, NEW.created_at)
    WHERE fact_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_units_backlog_moved AFTER UPDATE OF occurred_start, mentioned_at
    ON memory_units FOR EACH ROW
    WHEN (NEW.fact_type <> 'observation'
          AND coalesce(OLD.occurred_start, OLD.mentioned_at, OLD.created_at)
              IS DISTINCT FROM coalesce(NEW.occurred_start, NEW.mentioned_at, NEW.created_at))
    EXECUTE FUNCTION engram_backlog_moved();

-- Existing banks carry over: the facts still waiting go on the backlog as they were ordered.
INSERT INTO consolidation_backlog (fact_id, bank_id, event_at)
SELECT id, bank_id, coalesce(occurred_start, mentioned_at, created_at) FROM memory_units
WHERE consolidated_at IS NULL AND fact_type <> 'observation';

DROP INDEX memory_units_unconsolidated;
ALTER TABLE memory_units DROP COLUMN consolidated_at;
