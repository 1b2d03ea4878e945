-- A run may stop awaiting a person's answer (state `awaiting_input`), and keeps the answers
-- people gave (a JSON array, kept as text like every JSON column here).
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_state_check;
ALTER TABLE runs ADD CONSTRAINT runs_state_check
    CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'awaiting_input'));
ALTER TABLE runs ADD COLUMN answers TEXT;
