-- API keys (engine/auth/keys.py). The secret is never stored: `secret_hash` is an argon2id
-- hash of the whole token. `bank_id` NULL with scope 'admin' is a key for every bank.
CREATE TABLE api_keys (
    id                    text PRIMARY KEY,
    bank_id               text,
    scope                 text NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    secret_hash           text NOT NULL,
    description           text NOT NULL DEFAULT '',
    rate_limit_per_minute integer CHECK (rate_limit_per_minute > 0),
    created_at            timestamptz NOT NULL DEFAULT now(),
    expires_at            timestamptz,
    revoked_at            timestamptz,
    CHECK (bank_id IS NOT NULL OR scope = 'admin')
);

-- Who did what, when, with what outcome (engine/auth/audit.py); swept after the retention
-- period. No request bodies: memory content stays in the memory tables.
CREATE TABLE audit_logs (
    id           uuid PRIMARY KEY,
    action       text NOT NULL,
    transport    text NOT NULL,
    bank_id      text,
    key_id       text,
    operation_id text,
    status       integer,
    outcome      text NOT NULL,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    request      jsonb,
    metadata     jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_logs_bank_started ON audit_logs (bank_id, started_at DESC);
CREATE INDEX audit_logs_started ON audit_logs (started_at);
