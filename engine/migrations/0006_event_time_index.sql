-- Retain's temporal linking looks up stored facts near a fact's event time (occurred, else
-- mentioned) for a whole batch at once; this index serves that range scan.
CREATE INDEX memory_units_event_time
    ON memory_units (bank_id, (coalesce(occurred_start, mentioned_at)));
