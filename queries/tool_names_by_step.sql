-- Raw tool-name mix per step of one run, before classification.
-- Parameters: $run_id (text).
SELECT step, tool_name, count(*) AS calls,
       round(count(*) / sum(count(*)) OVER (PARTITION BY step), 4) AS share
FROM tool_calls
WHERE run_id = $run_id AND NOT format_error
GROUP BY step, tool_name
ORDER BY step, calls DESC;
