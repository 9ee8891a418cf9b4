-- Where a plan came from (`arbiter intake`: the URL of the issue it was planned from), and
-- the store's promise that one source makes one plan: two intakes of the same issue at once
-- race to insert the plan row, and the unique index lets exactly one of them win. Plans
-- written by hand have no source (NULL, which the index does not count).
ALTER TABLE plans ADD COLUMN source TEXT;
CREATE UNIQUE INDEX plans_source ON plans (source) WHERE source IS NOT NULL;
