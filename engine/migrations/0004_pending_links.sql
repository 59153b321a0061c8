-- Links whose target fact is still in flight (staged by another document's retain) wait here
-- and are stored when that fact is; their source fact exists already.
CREATE TABLE pending_links (
    bank_id   text NOT NULL,
    from_unit uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    to_unit   uuid NOT NULL,
    link_type text NOT NULL,
    weight    real NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (from_unit, to_unit, link_type)
);
CREATE INDEX pending_links_to ON pending_links (to_unit);
