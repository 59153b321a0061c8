-- Reinforcement's writes, narrow (engine/lifecycle/access.py): the accesses recall recorded
-- since the lifecycle last folded them into the fact. A flush rewrote every returned fact's
-- whole ~1.3 kB memory_units row (heap, WAL, a later vacuum; ~80 a recall); it now upserts one
-- ~80-byte row here per fact. A fact's access state is its memory_units columns with these
-- applied (engine/lifecycle/access_state.py: every reader goes through that join):
--     access_count     + accesses
--     last_accessed_at   the later of the two
--     strength           1 − (1 − strength) · keep,  keep = Π (1 − step)^n over the flushes
-- The lifecycle batch folds these rows into the facts it already rewrites, in the row
-- version of their decay, and deletes them. Nothing carries over: the facts' columns hold every access flushed
-- before this migration, and the table starts empty.
-- No foreign keys: a key check locks the referenced row (KEY SHARE) at every insert, and a
-- flush waiting for a bank's or a fact's row while holding side rows that the deletion's
-- cascade wants would deadlock with it. A flush writes only ids of the bank's facts;
-- erasure, clearing and deleting a bank delete the side rows in id order, as a flush takes
-- them (engine/lifecycle/access_state.py `drop_access`); a row no reader joins to (its fact
-- deleted as a flush wrote it) is removed by the next fold of its range.
CREATE TABLE fact_access (
    bank_id           text NOT NULL,
    fact_id           uuid NOT NULL,
    accesses          integer NOT NULL CHECK (accesses > 0),
    last_accessed_at  timestamptz NOT NULL,
    keep              double precision NOT NULL CHECK (keep BETWEEN 0 AND 1),
    -- one index: readers join on both, a fold takes a range of one bank's ids, a bank's
    -- deletion its prefix
    PRIMARY KEY (bank_id, fact_id)
) WITH (fillfactor = 70);  -- room for a row's next version on its page: upserts stay HOT
