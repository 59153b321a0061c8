-- Issue 14 (reach): the tables of the routes that fill in Hindsight's API.

-- Directives (Hindsight's CRUD resource): rules reflect follows, highest priority first.
-- Untagged active directives always apply; the config's plain `directives` list still does.
CREATE TABLE directives (
    bank_id    text NOT NULL REFERENCES banks ON DELETE CASCADE,
    id         text NOT NULL,
    name       text NOT NULL,
    content    text NOT NULL,
    priority   integer NOT NULL DEFAULT 0,
    is_active  boolean NOT NULL DEFAULT true,
    tags       text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, id)
);
CREATE INDEX directives_order ON directives (bank_id, priority DESC, created_at);

-- Every LLM call of retain, consolidation and reflect (and health checks): which model, how
-- many tokens, how long, and whether it worked. Written by the process that made the call.
CREATE TABLE llm_requests (
    id            uuid PRIMARY KEY,
    bank_id       text,
    operation     text NOT NULL,
    model         text NOT NULL,
    status        text NOT NULL CHECK (status IN ('success', 'error')),
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz NOT NULL,
    duration_ms   integer NOT NULL,
    input_tokens  integer NOT NULL DEFAULT 0,
    output_tokens integer NOT NULL DEFAULT 0,
    total_tokens  integer NOT NULL DEFAULT 0,
    error         text
);
CREATE INDEX llm_requests_bank ON llm_requests (bank_id, started_at DESC);

-- Webhooks: a bank's subscribers to its events, and every delivery (one per event and
-- webhook), sent with retries by a WebhookDeliveryWorkflow and signed with the secret.
CREATE TABLE webhooks (
    bank_id     text NOT NULL REFERENCES banks ON DELETE CASCADE,
    id          text NOT NULL,
    url         text NOT NULL,
    secret      text,
    event_types text[] NOT NULL DEFAULT '{}',  -- empty: every event
    enabled     boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, id)
);

CREATE TABLE webhook_deliveries (
    id                   text PRIMARY KEY,
    bank_id              text NOT NULL,
    webhook_id           text NOT NULL,
    url                  text NOT NULL,
    event_type           text NOT NULL,
    payload              jsonb NOT NULL,
    status               text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts             integer NOT NULL DEFAULT 0,
    last_error           text,
    last_response_status integer,
    last_attempt_at      timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (bank_id, webhook_id) REFERENCES webhooks ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (bank_id, webhook_id, created_at DESC);
