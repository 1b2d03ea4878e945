-- no-transaction
-- A run may stop awaiting a person's answer (state `awaiting_input`), and keeps the answers
-- people gave (a JSON array). SQLite cannot change a CHECK constraint in place, so `runs` is
-- made again, in one transaction, with foreign keys off meanwhile so that dropping the old table
-- leaves its attempts alone. The column is added first: a second process that finds it there
-- fails ("duplicate column name") and tries again once the first has recorded this migration,
-- rather than making the table again over the first one's writes.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
ALTER TABLE runs ADD COLUMN answers TEXT;
CREATE TABLE runs_new (
    id               TEXT    NOT NULL PRIMARY KEY,
    seq              INTEGER NOT NULL UNIQUE,
    state            TEXT    NOT NULL
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'awaiting_input')),
    spec             TEXT    NOT NULL CHECK (json_valid(spec)),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    iterations       INTEGER NOT NULL DEFAULT 0,
    halted_because   TEXT,
    best_score       REAL,
    model            TEXT,
    result           TEXT CHECK (result IS NULL OR json_valid(result)),
    worker_id        TEXT,
    lease_until      INTEGER,
    local            INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    answers          TEXT CHECK (answers IS NULL OR json_valid(answers))
);
INSERT INTO runs_new (id, seq, state, spec, created_at, updated_at, iterations, halted_because, best_score, model,
                      result, worker_id, lease_until, local, cancel_requested, answers)
    SELECT id, seq, state, spec, created_at, updated_at, iterations, halted_because, best_score, model,
           result, worker_id, lease_until, local, cancel_requested, answers
    FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_state_created ON runs (state, created_at, seq);
CREATE INDEX runs_created ON runs (created_at, seq);
CREATE INDEX runs_worker ON runs (worker_id) WHERE worker_id IS NOT NULL;
CREATE INDEX runs_lease ON runs (state, lease_until);
COMMIT;
PRAGMA foreign_keys = ON;
