-- The job claim (src/jobs/job-repo.ts): leases up to p_limit jobs of p_tasks, never one of p_running (the worker's
-- own): expired leases first, then due jobs oldest first, each taken in the order of its index (jobs_due_order,
-- jobs_leased_order) so that the scan stops at the limit: the queue outgrows its statistics during a burst, so sorts
-- and bitmap scans are off here (docs/decisions.md, "The one planner setting").
CREATE OR REPLACE FUNCTION jobs_claim(p_worker text, p_lease_until timestamptz, p_now timestamptz, p_tasks text[], p_limit integer, p_running bigint[])
RETURNS TABLE (id bigint, task text, tenant_id text, payload jsonb, attempts integer, max_attempts integer)
LANGUAGE plpgsql SET enable_sort = off SET enable_bitmapscan = off SET jit = off AS $$
BEGIN
  RETURN QUERY WITH expired AS (
    SELECT j.id FROM jobs j
    WHERE j.state = 'running' AND j.locked_until < p_now AND j.task = ANY (p_tasks)
      -- never re-take a job this worker is still running (a stalled event loop can outlive the lease)
      AND NOT (j.id = ANY (p_running))
    ORDER BY j.locked_until, j.id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  ), due AS (
    SELECT j.id FROM jobs j
    WHERE j.state = 'queued' AND j.run_at <= p_now AND j.task = ANY (p_tasks)
    ORDER BY j.run_at, j.id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  )
  UPDATE jobs j SET state = 'running', locked_by = p_worker, locked_until = p_lease_until, attempts = j.attempts + 1, updated_at = p_now
  WHERE j.id IN (SELECT picked.id FROM (SELECT e.id, 0 AS side FROM expired e UNION ALL SELECT d.id, 1 FROM due d) picked ORDER BY picked.side LIMIT p_limit)
  RETURNING j.id, j.task, j.tenant_id, j.payload, j.attempts, j.max_attempts;
END
$$;
