-- Memory lifecycle (docs/lifecycle.md): strength and decay, supersession, correction and
-- erasure. Every fact and observation gets an importance in [0, 1] at write time and a
-- strength that starts there, is reinforced by recall and decays daily; `state` says whether
-- recall shows it by default (only 'active' facts are); valid_from/valid_to bound when it
-- was true, and a superseded fact names its successor. Nothing here holds memory text
-- outside memory_units and memory_versions, so erasing a fact erases its text everywhere.
ALTER TABLE memory_units
    ADD COLUMN importance       real NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
    ADD COLUMN strength         real NOT NULL DEFAULT 0.5 CHECK (strength BETWEEN 0 AND 1),
    ADD COLUMN access_count     integer NOT NULL DEFAULT 0,
    ADD COLUMN last_accessed_at timestamptz,
    ADD COLUMN state            text NOT NULL DEFAULT 'active'
               CHECK (state IN ('active', 'archived', 'superseded')),
    ADD COLUMN valid_from       timestamptz,
    ADD COLUMN valid_to         timestamptz,
    ADD COLUMN superseded_by    uuid REFERENCES memory_units ON DELETE SET NULL,
    ADD COLUMN needs_correction boolean NOT NULL DEFAULT false,
    -- when decay was last applied (engine/lifecycle/maintenance.py): decaying again at the
    -- same "now" changes nothing, so a retried batch is harmless
    ADD COLUMN decayed_at       timestamptz;
-- Recall's arms filter on state inside their scans; the few inactive rows are found here.
CREATE INDEX memory_units_inactive ON memory_units (bank_id, state) WHERE state <> 'active';
CREATE INDEX memory_units_superseded_by ON memory_units (superseded_by)
    WHERE superseded_by IS NOT NULL;

-- Every change of a fact (correction, supersession, archive, restore, feedback, merge): the
-- text before and after. Deleted with the fact, so erasure leaves no copy here.
CREATE TABLE memory_versions (
    id           bigserial PRIMARY KEY,
    bank_id      text NOT NULL,
    memory_id    uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    change       text NOT NULL CHECK (change IN ('created', 'corrected', 'superseded',
                 'supersedes', 'archived', 'restored', 'merged', 'feedback')),
    previous_text text,
    new_text     text,
    previous     jsonb NOT NULL DEFAULT '{}'::jsonb,  -- dates, tags, state before the change
    reason       text NOT NULL DEFAULT '',
    related_id   uuid,
    changed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, id);

CREATE TABLE memory_feedback (
    id                bigserial PRIMARY KEY,
    bank_id           text NOT NULL,
    memory_id         uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    signal            text NOT NULL CHECK (signal IN ('useful', 'not_useful', 'wrong')),
    reason            text NOT NULL DEFAULT '',
    importance_before real NOT NULL,
    importance_after  real NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_feedback_memory ON memory_feedback (memory_id);

-- What was forgotten, as hashes only (engine/lifecycle/erasure.py): a chunk or fact whose
-- content hash is here is not stored again by a later retain or import.
CREATE TABLE tombstones (
    bank_id      text NOT NULL REFERENCES banks ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('chunk', 'fact')),
    content_hash text NOT NULL,
    forgotten_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, kind, content_hash)
);


-- Each bank's lifecycle schedule (a Temporal Schedule, created with the bank's first write
-- and deleted with the bank) and its last run.
CREATE TABLE lifecycle_state (
    bank_id           text PRIMARY KEY REFERENCES banks ON DELETE CASCADE,
    schedule_id       text NOT NULL,
    cron              text NOT NULL,
    last_run_at       timestamptz,
    last_operation_id text
);
