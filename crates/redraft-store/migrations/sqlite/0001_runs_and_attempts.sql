-- Runs and their attempts (SQLite). The same logical schema as migrations/postgres:
-- JSON is TEXT here (kept verbatim), times are milliseconds since the Unix epoch.
CREATE TABLE runs (
    id             TEXT    NOT NULL PRIMARY KEY,
    -- Insertion order: breaks ties between runs created in the same millisecond.
    seq            INTEGER NOT NULL UNIQUE,
    state          TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    spec           TEXT    NOT NULL CHECK (json_valid(spec)),
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    -- Summary columns, kept up to date on every write so that listing never parses JSON.
    iterations     INTEGER NOT NULL DEFAULT 0,
    halted_because TEXT,
    best_score     REAL,
    model          TEXT,
    -- The result without its history (the history is the attempts table).
    result         TEXT CHECK (result IS NULL OR json_valid(result)),
    -- Worker queue leases.
    worker_id      TEXT,
    lease_until    INTEGER
);

CREATE INDEX runs_state_created ON runs (state, created_at, seq);
CREATE INDEX runs_created ON runs (created_at, seq);

CREATE TABLE attempts (
    run_id       TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration    INTEGER NOT NULL,
    status       TEXT    NOT NULL,
    score        REAL    NOT NULL,
    has_artifact INTEGER NOT NULL,
    record       TEXT    NOT NULL CHECK (json_valid(record)),
    recorded_at  INTEGER NOT NULL,
    PRIMARY KEY (run_id, iteration)
);
