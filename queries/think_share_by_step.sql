-- Think share of all executed tool calls per step of one run: the r6 collapse signal
-- (0.06-0.08 early, 0.73 at collapse). Needs the call_classes table (`trajlens classify`).
-- Parameters: $run_id (text).
SELECT
    step,
    count(*) AS calls,
    count(*) FILTER (WHERE primary_class = 'think') AS think_calls,
    round(count(*) FILTER (WHERE primary_class = 'think') / count(*), 4) AS think_share
FROM call_classes
WHERE run_id = $run_id AND primary_class IS NOT NULL
GROUP BY step
ORDER BY step;
