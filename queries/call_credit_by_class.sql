-- Credit per behaviour class under one estimator, by loss aggregation, joined to call_classes:
-- calls, mean push per call, share of calls pushed up, and how many calls were credited by
-- the fallback rule (no token arrays). Needs call_credit (`trajlens attribute`) and
-- call_classes (`trajlens classify`).
-- Parameters: $run_id (text), $estimator (text, a label such as gae_raw or grpo).
SELECT
    k.primary_class,
    c.aggregation,
    count(*) AS calls,
    avg(c.push) AS mean_push,
    round(avg(CASE WHEN c.push > 0 THEN 1.0 ELSE 0.0 END), 4) AS share_pushed_up,
    round(avg(c.tokens), 1) AS mean_tokens,
    count(*) FILTER (WHERE c.fallback) AS fallback_calls
FROM call_credit c
JOIN call_classes k USING (run_id, trajectory_id, call_index)
WHERE c.run_id = $run_id AND c.estimator = $estimator
GROUP BY k.primary_class, c.aggregation
ORDER BY k.primary_class, c.aggregation;
