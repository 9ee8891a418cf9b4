-- Migration 7 is Postgres' (arbiter_finish_fast keyed by primary keys, planned once per
-- connection: see migrations/postgres/0007_report_plans.sql). SQLite has no such function;
-- the step is kept so both stores number their migrations alike.
SELECT 1;
