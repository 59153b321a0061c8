-- Reinforcement's writes, narrow (engine/lifecycle/access.py): the accesses recall recorded
-- since the lifecycle last folded them into the fact. A flush rewrote every returned fact's
-- whole ~1.3 kB memory_units row (heap, WAL, a later vacuum; ~80 a recall); it now upserts one
-- ~80-byte row here per fact. A fact's access state is its memory_units columns with these
-- applied (engine/lifecycle/access_state.py: every reader goes through that join):
--     access_count     + accesses
--     last_accessed_at   the later of the two
--     strength           1 − (1 − strength) · keep,  keep = Π (1 − step)^n over the flushes
-- The lifecycle batch folds these rows into the facts it already rewrites, before decaying
-- them, and deletes them. Nothing carries over: the facts' columns hold every access flushed
-- before this migration, and the table starts empty.
-- No key to memory_units: a key check would lock the fact's row (KEY SHARE) at every insert,
-- and a fact deleted meanwhile leaves a row no reader joins to, which the next fold removes.
-- The bank's key makes a flush for a bank deleted meanwhile fail rather than leave rows.
CREATE TABLE fact_access (
    bank_id           text NOT NULL REFERENCES banks ON DELETE CASCADE,
    fact_id           uuid NOT NULL,
    accesses          integer NOT NULL CHECK (accesses > 0),
    last_accessed_at  timestamptz NOT NULL,
    keep              double precision NOT NULL CHECK (keep BETWEEN 0 AND 1),
    -- one index: readers join on both, a fold takes a range of one bank's ids, a bank's
    -- deletion its prefix
    PRIMARY KEY (bank_id, fact_id)
) WITH (fillfactor = 70);  -- room for a row's next version on its page: upserts stay HOT
