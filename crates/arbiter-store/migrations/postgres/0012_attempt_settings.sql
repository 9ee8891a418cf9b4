-- The run settings an attempt was resolved with when it spread over units, as JSON: every
-- unit of its tournament runs with them, whatever the configuration says by the time the
-- unit is claimed. NULL for attempts that never spread (and those spread before this).
ALTER TABLE plan_attempts ADD COLUMN settings TEXT;
