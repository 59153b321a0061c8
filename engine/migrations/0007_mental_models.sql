-- Mental models: a named question (source_query) whose answer reflect keeps current. The
-- answer, the ids it rests on and every previous version are kept; the refresh policy is
-- "after consolidation" and/or a cron expression run by a Temporal Schedule whose id is
-- stored here (created, updated and deleted with the model). A report (kind 'report') is a
-- model with several questions, answered one by one, whose every scheduled run is kept.
CREATE TABLE mental_models (
    bank_id            text NOT NULL REFERENCES banks ON DELETE CASCADE,
    id                 text NOT NULL,
    name               text NOT NULL,
    source_query       text NOT NULL,
    -- A report's questions; a model's single question is its source_query.
    questions          text[] NOT NULL DEFAULT '{}',
    content            text NOT NULL DEFAULT '',
    -- The content's embedding, so reflect's search_mental_models tool can rank models.
    embedding          vector({embedding_dim}),
    tags               text[] NOT NULL DEFAULT '{}',
    max_tokens         integer NOT NULL DEFAULT 2048,
    -- Trigger settings as sent (Hindsight's MentalModelTriggerInput), normalised.
    trg                jsonb NOT NULL DEFAULT '{}'::jsonb,
    schedule_id        text,
    -- 'model' (a mental model) or 'report' (a scheduled reflect report: several questions).
    kind               text NOT NULL DEFAULT 'model' CHECK (kind IN ('model', 'report')),
    -- Memory unit ids (facts, observations) and mental model ids the content is based on.
    based_on           jsonb NOT NULL DEFAULT '[]'::jsonb,
    based_on_ids       uuid[] NOT NULL DEFAULT '{}',
    reflect_response   jsonb,
    version            integer NOT NULL DEFAULT 0,
    -- A digest of the evidence the last refresh saw (what recall finds for each question);
    -- a refresh whose digest is unchanged is skipped.
    evidence_digest    text,
    last_refreshed_at  timestamptz,
    last_memory_seen_at timestamptz,
    last_refresh_failed_at timestamptz,
    last_refresh_error text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, id)
);
CREATE INDEX mental_models_based_on ON mental_models USING gin (based_on_ids);
CREATE INDEX mental_models_after_consolidation ON mental_models (bank_id)
    WHERE (trg ->> 'refresh_after_consolidation')::boolean;

CREATE TABLE mental_model_versions (
    bank_id        text NOT NULL,
    id             text NOT NULL,
    version        integer NOT NULL,
    content        text NOT NULL,
    based_on       jsonb NOT NULL DEFAULT '[]'::jsonb,
    source_query   text NOT NULL,
    refreshed_at   timestamptz NOT NULL DEFAULT now(),
    reason         text NOT NULL,
    -- The refresh operation that wrote this version (idempotency of a retried store).
    operation_id   text NOT NULL DEFAULT '',
    PRIMARY KEY (bank_id, id, version),
    FOREIGN KEY (bank_id, id) REFERENCES mental_models ON DELETE CASCADE
);
