-- arbiter_finish_fast's statements have one good plan whatever the statistics say.
--
-- Migration 6 planned the function for every call: after five calls PL/pgSQL may keep a
-- generic plan, and a generic plan of `id IN (SELECT … FROM plan_deps …)` (or of
-- `id = ANY(array)`, on tables not yet analyzed) reads every task of the plan through the
-- primary key's `plan_id` prefix: reports fell from ~620 to ~200 a second on a store of
-- 22,000 tasks. Planning every call cost the control plane about a sixth of its reports per
-- second instead (docs/BENCHMARKS.md, "The control plane").
--
-- Here every statement on plan_tasks names one row by its whole primary key (plan_id, id) —
-- the dependents are read first (through plan_deps_dependents) and taken one at a time —
-- which every plan, generic or not, reads through the primary key. So the cached generic
-- plans are the right ones and the function is planned once per connection. Same arguments,
-- same results, same locking order (the task and its dependents, in id order).
CREATE OR REPLACE FUNCTION arbiter_finish_fast(
    p_plan TEXT, p_task TEXT, p_status TEXT, p_not_before BIGINT, p_run_id TEXT, p_commit TEXT,
    p_reason TEXT, p_now BIGINT, p_fence BIGINT, p_attempt_status TEXT, p_kind TEXT, p_data TEXT
) RETURNS TEXT[] LANGUAGE plpgsql AS $$
DECLARE
    v_attempts BIGINT;
    v_dependents TEXT[];
    v_id TEXT;
    v_status TEXT;
    v_ready TEXT[] := '{}';
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1634886260, hashtext(p_plan));
    v_dependents := ARRAY(
        SELECT d.task_id FROM plan_deps d WHERE d.plan_id = p_plan AND d.depends_on = p_task ORDER BY d.task_id);
    FOR v_id IN SELECT x FROM unnest(v_dependents || p_task) AS x ORDER BY x LOOP
        PERFORM 1 FROM plan_tasks t WHERE t.plan_id = p_plan AND t.id = v_id FOR UPDATE;
    END LOOP;
    UPDATE plan_tasks t SET status = p_status, not_before = p_not_before, lease_owner = NULL, lease_expires = NULL,
           run_id = COALESCE(p_run_id, t.run_id), commit_sha = COALESCE(p_commit, t.commit_sha), reason = p_reason,
           version = t.version + 1, updated_at = p_now
     WHERE t.plan_id = p_plan AND t.id = p_task AND t.status = 'running' AND t.fence = p_fence AND t.reserved_pico = 0
     RETURNING t.attempts INTO v_attempts;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE plan_attempts a SET status = p_attempt_status, finished_at = p_now, run_id = COALESCE(p_run_id, a.run_id),
           commit_sha = p_commit, reason = p_reason
     WHERE a.plan_id = p_plan AND a.task_id = p_task AND a.fence = p_fence;
    INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)
    VALUES (p_plan, p_task, v_attempts, p_kind, p_now, p_data);
    IF p_status = 'done' THEN
        FOREACH v_id IN ARRAY v_dependents LOOP
            UPDATE plan_tasks t SET deps_left = t.deps_left - 1,
                   status = CASE WHEN t.deps_left = 1 AND t.status = 'blocked' THEN 'ready' ELSE t.status END,
                   version = t.version + 1, updated_at = p_now
             WHERE t.plan_id = p_plan AND t.id = v_id
            RETURNING t.status INTO v_status;
            IF FOUND AND v_status = 'ready' THEN
                v_ready := v_ready || v_id;
                INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)
                VALUES (p_plan, v_id, NULL, 'task_ready', p_now, json_build_object('after', p_task)::text);
            END IF;
        END LOOP;
    END IF;
    RETURN v_ready;
END
$$;
ALTER FUNCTION arbiter_finish_fast(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, TEXT, BIGINT, BIGINT, TEXT, TEXT, TEXT)
    RESET plan_cache_mode;
