-- arbiter_finish_fast is planned for the task it finishes, every time.
--
-- PL/pgSQL caches the plans of a function's statements and, after five runs, may keep a
-- generic plan that ignores the parameters. Once the store holds tens of thousands of tasks,
-- the generic plan of the statements keyed by (plan_id, task id) scanned far more than the
-- one task and its dependents: a control plane's reports fell from ~620 to ~200 a second on a
-- store of 22,000 tasks (docs/BENCHMARKS.md, "The control plane"). Planning each call costs
-- a fraction of a millisecond; a bad generic plan grows with every plan the store keeps.
ALTER FUNCTION arbiter_finish_fast(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, TEXT, BIGINT, BIGINT, TEXT, TEXT, TEXT)
    SET plan_cache_mode = force_custom_plan;
