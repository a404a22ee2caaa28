-- One logged training scalar over the steps of a run (critic/vf_explained_var, actor/lr, ...).
-- Parameters: $run_id (text), $name (text, the metric as logged).
SELECT step, value
FROM step_metrics
WHERE run_id = $run_id AND name = $name
ORDER BY step;
