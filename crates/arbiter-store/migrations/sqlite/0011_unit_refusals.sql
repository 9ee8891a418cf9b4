-- A worker that cannot run a unit it claimed (its git cannot fetch from the control plane,
-- its sandbox cannot be set up, it cannot read the assignment) refuses it: the unit goes
-- back to the queue, the try counted, and the refusing worker is not given it again before
-- avoid_until (microseconds), so that another worker runs it first.
ALTER TABLE plan_units ADD COLUMN avoid_worker TEXT;
ALTER TABLE plan_units ADD COLUMN avoid_until BIGINT NOT NULL DEFAULT 0;
