-- Migration 6 is Postgres' (arbiter_finish_fast planned per call: see
-- migrations/postgres/0006_finish_plans.sql). SQLite has no such function and plans each
-- statement it prepares; the step is kept so both stores number their migrations alike.
SELECT 1;
