-- Observations: beliefs consolidated from facts (engine/consolidation/). They are rows of
-- memory_units (fact_type 'observation') so recall searches one index; these tables hold
-- what only observations have. An observation's tags scope is its memory_units.tags, sorted:
-- facts are only ever consolidated into observations with exactly their tag set.

-- The backlog: a fact waits for consolidation until consolidated_at is set, in the same
-- transaction that applied its effects, so a crash never skips or repeats a fact. It is taken
-- in the order things happened (a bulk import stores documents in any order), so beliefs
-- evolve in the right direction across batches.
ALTER TABLE memory_units ADD COLUMN consolidated_at timestamptz;
CREATE INDEX memory_units_unconsolidated
    ON memory_units (bank_id, (coalesce(occurred_start, mentioned_at, created_at)), id)
    WHERE consolidated_at IS NULL AND fact_type <> 'observation';
CREATE INDEX memory_units_observation_scope ON memory_units (bank_id, tags)
    WHERE fact_type = 'observation';

CREATE TABLE observations (
    observation_id    uuid PRIMARY KEY REFERENCES memory_units ON DELETE CASCADE,
    bank_id           text NOT NULL,
    origin            text NOT NULL CHECK (origin IN ('local', 'llm')),
    version           integer NOT NULL DEFAULT 1,
    -- The local path's parsed claim (subject, aspect, polarity, object, terms), or null.
    claim             jsonb,
    -- Freshness: when its supporting evidence happened, and the trend of that evidence
    -- (engine/consolidation/freshness.py) as of the last change.
    first_evidence_at timestamptz,
    last_evidence_at  timestamptz,
    trend             text NOT NULL DEFAULT 'new'
                      CHECK (trend IN ('new', 'strengthening', 'stable', 'weakening', 'stale'))
);
CREATE INDEX observations_bank ON observations (bank_id);
CREATE INDEX observations_claim ON observations (bank_id, (claim->>'subject'), (claim->>'aspect'));

-- Which facts an observation rests on, with the quoted evidence. `supports` counts towards
-- proof_count; `superseded` supported an earlier version; `contradicts` is an older fact that
-- disagrees with the current version.
CREATE TABLE observation_evidence (
    observation_id uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    fact_id        uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    bank_id        text NOT NULL,
    quote          text NOT NULL,
    stance         text NOT NULL CHECK (stance IN ('supports', 'superseded', 'contradicts')),
    evidence_at    timestamptz,
    added_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (observation_id, fact_id)
);
CREATE INDEX observation_evidence_fact ON observation_evidence (fact_id);

-- Every change of an observation's text or existence. No foreign key to memory_units: the
-- record of a retracted or merged observation outlives it.
CREATE TABLE observation_history (
    id             bigserial PRIMARY KEY,
    bank_id        text NOT NULL REFERENCES banks ON DELETE CASCADE,
    observation_id uuid NOT NULL,
    version        integer NOT NULL,
    change         text NOT NULL CHECK (change IN ('updated', 'merged', 'merged_into', 'retracted')),
    previous_text  text NOT NULL,
    new_text       text,
    reason         text NOT NULL,
    fact_ids       uuid[] NOT NULL DEFAULT '{}',
    related_id     uuid,
    changed_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX observation_history_observation ON observation_history (observation_id, id DESC);
CREATE INDEX observation_history_bank ON observation_history (bank_id);

-- Per-bank watermark of consolidation, for stats and the schedule.
CREATE TABLE consolidation_state (
    bank_id              text PRIMARY KEY REFERENCES banks ON DELETE CASCADE,
    last_consolidated_at timestamptz,
    facts_consolidated   bigint NOT NULL DEFAULT 0,
    last_operation_id    text
);

-- What each batch of a consolidation did, keyed by its operation and position: a batch whose
-- activity failed after its commit is retried under the same key and answers from here
-- instead of taking the next facts, so the totals stay exact. Removed when the run ends.
CREATE TABLE consolidation_batches (
    operation_id text NOT NULL,
    seq          integer NOT NULL,
    bank_id      text NOT NULL REFERENCES banks ON DELETE CASCADE,
    result       jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (operation_id, seq)
);
