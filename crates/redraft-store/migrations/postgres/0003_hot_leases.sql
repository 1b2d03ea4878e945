-- Renewing a lease rewrites the run's row every heartbeat. With `lease_until` indexed, each
-- renewal also wrote a new entry into every index of the table. Without that index (finding
-- expired leases reads the running runs through `runs_state_created`, at most as many as the
-- workers execute), a renewal is a heap-only update, made in place when the page has room,
-- which the fill factor leaves.
DROP INDEX runs_lease;
ALTER TABLE runs SET (fillfactor = 70);
