-- Who owns a plan's integration branch. arbiter moves (commits onto, resets) only a branch
-- the store records for the plan: one it created ('created', at branch_base) or one the user
-- explicitly handed to it with --adopt-branch ('adopted', its tip then in branch_base; never
-- moved back by a reset). The record names the branch it concerns: a plan whose
-- integration_branch changes has no record for the new name until it is created or adopted.
ALTER TABLE plans ADD COLUMN branch_name TEXT;
ALTER TABLE plans ADD COLUMN branch_origin TEXT CHECK (branch_origin IN ('created', 'adopted'));
ALTER TABLE plans ADD COLUMN branch_base TEXT;
ALTER TABLE plans ADD COLUMN branch_recorded_at INTEGER;
