-- Runs and their attempts (PostgreSQL). The same logical schema as migrations/sqlite.
-- JSON columns are `json`, not `jsonb`: `json` keeps the text as written (key order, numbers),
-- so an artifact reads back exactly as the model wrote it; nothing queries inside the JSON.
-- Times are milliseconds since the Unix epoch from the database's clock (the transaction's
-- start), so the leases of workers on several machines are compared against one clock.
CREATE FUNCTION redraft_now_ms() RETURNS BIGINT
    LANGUAGE sql STABLE
    AS $$ SELECT (extract(epoch FROM now()) * 1000)::BIGINT $$;

CREATE TABLE runs (
    id             TEXT             NOT NULL PRIMARY KEY,
    -- Insertion order: breaks ties between runs created in the same millisecond.
    seq            BIGINT           GENERATED ALWAYS AS IDENTITY UNIQUE,
    state          TEXT             NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    spec           JSON             NOT NULL,
    created_at     BIGINT           NOT NULL,
    updated_at     BIGINT           NOT NULL,
    -- Summary columns, kept up to date on every write so that listing never parses JSON.
    iterations     BIGINT           NOT NULL DEFAULT 0,
    halted_because TEXT,
    best_score     DOUBLE PRECISION,
    model          TEXT,
    -- The result without its history (the history is the attempts table).
    result         JSON,
    -- Worker queue leases.
    worker_id      TEXT,
    lease_until    BIGINT
);

CREATE INDEX runs_state_created ON runs (state, created_at, seq);
CREATE INDEX runs_created ON runs (created_at, seq);

CREATE TABLE attempts (
    run_id       TEXT             NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration    BIGINT           NOT NULL,
    status       TEXT             NOT NULL,
    score        DOUBLE PRECISION NOT NULL,
    has_artifact BOOLEAN          NOT NULL,
    record       JSON             NOT NULL,
    recorded_at  BIGINT           NOT NULL,
    PRIMARY KEY (run_id, iteration)
);
