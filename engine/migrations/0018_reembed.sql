-- Re-embedding a database with another model (engine/reembed.py, workflows/reembed.py).
-- One row per run. The new vectors are written beside the old ones (columns
-- `embedding_next`/`token_vectors_next`, added by the run with the new model's dimension),
-- so recall keeps using the old ones until the switch swaps them in one transaction.
CREATE TABLE reembed_runs (
    id            uuid PRIMARY KEY,
    model         text NOT NULL,
    space         text NOT NULL,
    dimension     integer NOT NULL,
    from_space    text NOT NULL,
    state         text NOT NULL CHECK (state IN ('filling', 'switched', 'done', 'cancelled')),
    total         bigint NOT NULL DEFAULT 0,
    done          bigint NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL DEFAULT now(),
    switched_at   timestamptz,
    finished_at   timestamptz,
    error         text
);
-- At most one run fills at a time.
CREATE UNIQUE INDEX reembed_runs_active ON reembed_runs ((true)) WHERE state = 'filling';
