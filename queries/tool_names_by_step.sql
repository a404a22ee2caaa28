-- Raw tool-name mix per step of one run, before classification, on its measured split (the
-- measured_splits view: training, or the split a run without training data has); format errors
-- left out.
-- Parameters: $run_id (text).
SELECT c.step, c.tool_name, count(*) AS calls,
       round(count(*) / sum(count(*)) OVER (PARTITION BY c.step), 4) AS share
FROM tool_calls c
JOIN trajectories t USING (run_id, trajectory_id)
JOIN measured_splits s ON s.run_id = t.run_id AND s.split = t.split
WHERE c.run_id = $run_id AND NOT c.format_error
GROUP BY c.step, c.tool_name
ORDER BY c.step, calls DESC;
