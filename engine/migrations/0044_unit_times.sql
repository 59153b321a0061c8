-- The units' times, indexed in a narrow table of their own instead of on memory_units.
-- Consolidation gives an observation a new time range (its supporting facts' first and last)
-- at almost every piece of evidence, and while memory_units indexed those columns that update
-- could never be HOT: each one wrote a new version of the observation's row on another page
-- and an entry in every index of memory_units, both HNSW graphs included (139 s of the 603 s
-- it took to consolidate 100,000 facts, docs/benchmarks.md). Now nothing on memory_units
-- indexes a time, so that update stays on its page (migration 0038 left room there), and the
-- new range is written here, to a row of ~80 bytes and four b-trees.
-- memory_units keeps its time columns; every reader reads them there. Only searches by time
-- (recall's exact window and its timeline neighbours, retain's temporal links) read this
-- table. The triggers below keep it equal to memory_units whichever path writes a unit
-- (retain, import, restore, consolidation, correction); a unit's delete takes its row along.
CREATE TABLE unit_times (
    unit_id        uuid PRIMARY KEY REFERENCES memory_units ON DELETE CASCADE,
    bank_id        text NOT NULL,
    fact_type      text NOT NULL,
    occurred_start timestamptz,
    occurred_end   timestamptz,
    mentioned_at   timestamptz
);

INSERT INTO unit_times (unit_id, bank_id, fact_type, occurred_start, occurred_end, mentioned_at)
SELECT id, bank_id, fact_type, occurred_start, occurred_end, mentioned_at FROM memory_units;

-- The indexes memory_units had (0001, 0006, 0025), here. Retain's temporal links look up facts
-- only, so the event-time index leaves observations out and their updates do not touch it.
CREATE INDEX unit_times_occurred ON unit_times (bank_id, occurred_start, occurred_end);
CREATE INDEX unit_times_mentioned ON unit_times (bank_id, mentioned_at);
CREATE INDEX unit_times_event_time ON unit_times (bank_id, (coalesce(occurred_start, mentioned_at)))
    WHERE fact_type <> 'observation';
CREATE INDEX unit_times_long_lasting ON unit_times (bank_id, occurred_end)
    WHERE occurred_end - occurred_start > interval '744 hours';

DROP INDEX memory_units_occurred;
DROP INDEX memory_units_mentioned;
DROP INDEX memory_units_event_time;
DROP INDEX memory_units_long_lasting;

-- Every unit inserted, by any path: one statement per insert statement.
CREATE FUNCTION engram_unit_times_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO unit_times (unit_id, bank_id, fact_type, occurred_start, occurred_end,
                            mentioned_at)
    SELECT id, bank_id, fact_type, occurred_start, occurred_end, mentioned_at FROM new_units;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_units_times_insert AFTER INSERT ON memory_units
    REFERENCING NEW TABLE AS new_units FOR EACH STATEMENT
    EXECUTE FUNCTION engram_unit_times_added();

-- A unit whose times or type changed (an observation's new evidence, a correction).
CREATE FUNCTION engram_unit_times_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE unit_times
    SET fact_type = NEW.fact_type, occurred_start = NEW.occurred_start,
        occurred_end = NEW.occurred_end, mentioned_at = NEW.mentioned_at
    WHERE unit_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_units_times_moved
    AFTER UPDATE OF fact_type, occurred_start, occurred_end, mentioned_at ON memory_units
    FOR EACH ROW
    WHEN ((OLD.fact_type, OLD.occurred_start, OLD.occurred_end, OLD.mentioned_at)
          IS DISTINCT FROM (NEW.fact_type, NEW.occurred_start, NEW.occurred_end, NEW.mentioned_at))
    EXECUTE FUNCTION engram_unit_times_moved();

ANALYZE unit_times;
