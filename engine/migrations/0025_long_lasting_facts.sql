-- Facts that last longer than 31 days (744 hours), by their end: the temporal arm's exact
-- window (engine/recall/temporal.py) reads the facts that started before a window and still
-- go on in it. Through (bank_id, occurred_start, occurred_end) that was every fact started
-- before the window, or a sequential scan: at 100k facts over four years the planner, taking
-- "started before" and "ended after" as independent, estimated 19,755 rows for 64 and read
-- all 25,000 pages (480-1,180 ms for "two weeks ago"). Now facts started within 744 hours
-- before the window come from the range of that index, and the few older ones that still
-- go on from this partial index.
CREATE INDEX memory_units_long_lasting ON memory_units (bank_id, occurred_end)
    WHERE occurred_end - occurred_start > interval '744 hours';
