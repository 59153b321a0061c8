-- BM25 reads postings (bank, term) -> (fact, tf). With tf in the primary key's index the
-- keyword arm's screen is an index-only scan: at 100k facts a question's 11k postings cost
-- 11k heap fetches (15 ms of the arm's 27 ms screen) without it (engine/recall/keyword.py).
ALTER TABLE memory_terms DROP CONSTRAINT memory_terms_pkey;
ALTER TABLE memory_terms ADD CONSTRAINT memory_terms_pkey PRIMARY KEY (bank_id, term, unit_id)
    INCLUDE (tf);

-- The graph arm reads the first mentions of an entity by fact id (engine/recall/graph.py):
-- with (entity_id, unit_id) that is a range of the index, not a read of every mention and a
-- sort (at 100k facts, 8 entities: 4,929 buffer reads for ~900 mentions each, now ~30).
CREATE INDEX unit_entities_entity_unit ON unit_entities (entity_id, unit_id);
DROP INDEX unit_entities_entity;
