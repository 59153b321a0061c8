-- Observations' own HNSW index (consolidation's nearest-observation reads, engine/
-- consolidation/candidates.py): the related observations of a fact naming a popular entity
-- and the near-duplicate search after each new observation. Through the index of every unit
-- those scans visited their whole tuple budget, as observations are 2-10% of a bank's rows;
-- through the exact reads their cost grew with the observations (the entity arm read every
-- observation naming the batch's people, ~10,000 for the most named at 100,000 facts).
-- Named so that its name starts like the index of every unit (plans are checked by prefix).
-- engine/reembed.py builds the same index on the next column and swaps it in.
CREATE INDEX memory_units_embedding_observations ON memory_units
    USING hnsw (embedding halfvec_cosine_ops) WHERE fact_type = 'observation';
