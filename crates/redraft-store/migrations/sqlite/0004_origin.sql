-- Which face a run's request came through (`cli`, `http`, `mcp`): a run is continued with the
-- trust of where it came from. Runs recorded before have none (their `local` flag tells).
ALTER TABLE runs ADD COLUMN origin TEXT CHECK (origin IS NULL OR origin IN ('cli', 'http', 'mcp'));
