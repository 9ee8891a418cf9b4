-- Migration 10 is Postgres' (reports that arrive together finished in one call: see
-- migrations/postgres/0010_batched_reports.sql). SQLite has one writer at a time and no
-- such function; the step is kept so both stores number their migrations alike.
SELECT 1;
