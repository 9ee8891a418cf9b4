-- Reports that arrive together, finished together: one call (one statement, one commit)
-- for a batch of one-statement reports of a plan (`PgStore`'s report lanes).
--
-- It takes the plan's shared ending lock, then every row the reports change — each
-- reported task and its dependents — once, in id order (the one order every multi-row
-- change uses), before changing any; then finishes each report as `arbiter_finish_fast`
-- does, which finds its locks held. Every statement on `plan_tasks` names one row by its
-- whole primary key, as in migration 7, so the cached generic plans read by the key.
-- Returns, for the n-th report (from 1), the dependents it made ready, or NULL when its
-- lease was no longer held (nothing of that report changes then).
CREATE FUNCTION arbiter_finish_fast_many(
    p_plan TEXT, p_tasks TEXT[], p_statuses TEXT[], p_not_befores BIGINT[], p_run_ids TEXT[], p_commits TEXT[],
    p_reasons TEXT[], p_nows BIGINT[], p_fences BIGINT[], p_attempt_statuses TEXT[], p_kinds TEXT[], p_datas TEXT[]
) RETURNS TABLE (n INT, newly_ready TEXT[]) LANGUAGE plpgsql AS $$
DECLARE
    v_rows TEXT[] := '{}';
    v_id TEXT;
    v_i INT;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1634886260, hashtext(p_plan));
    FOR v_i IN 1 .. cardinality(p_tasks) LOOP
        v_rows := v_rows || p_tasks[v_i] || ARRAY(
            SELECT d.task_id FROM plan_deps d WHERE d.plan_id = p_plan AND d.depends_on = p_tasks[v_i]);
    END LOOP;
    FOR v_id IN SELECT DISTINCT x FROM unnest(v_rows) AS x ORDER BY x LOOP
        PERFORM 1 FROM plan_tasks t WHERE t.plan_id = p_plan AND t.id = v_id FOR UPDATE;
    END LOOP;
    FOR v_i IN 1 .. cardinality(p_tasks) LOOP
        n := v_i;
        newly_ready := arbiter_finish_fast(p_plan, p_tasks[v_i], p_statuses[v_i], p_not_befores[v_i], p_run_ids[v_i],
            p_commits[v_i], p_reasons[v_i], p_nows[v_i], p_fences[v_i], p_attempt_statuses[v_i], p_kinds[v_i],
            p_datas[v_i]);
        RETURN NEXT;
    END LOOP;
END
$$;
