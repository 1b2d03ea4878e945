-- The run queue: whether workers may claim a run (runs started by `redraft run` or an MCP
-- session are resumed only by `redraft runs resume`), a cancel request a run's holder sees when it renews its lease, and indexes
-- for renewing a worker's leases and finding expired ones.
ALTER TABLE runs ADD COLUMN local BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE runs ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX runs_worker ON runs (worker_id) WHERE worker_id IS NOT NULL;
CREATE INDEX runs_lease ON runs (state, lease_until);
