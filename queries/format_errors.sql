-- Turns the agent's harness rejected as malformed, per run and tool, on each run's measured
-- split (the measured_splits view: training, or the split a run without training data has), as
-- the report's format-error rate counts them: kept in the data, never counted as executed actions.
-- Parameters: none.
SELECT c.run_id, c.tool_name, count(*) AS rejected_calls, count(DISTINCT c.trajectory_id) AS trajectories
FROM tool_calls c
JOIN trajectories t USING (run_id, trajectory_id)
JOIN measured_splits s ON s.run_id = t.run_id AND s.split = t.split
WHERE c.format_error
GROUP BY c.run_id, c.tool_name
ORDER BY rejected_calls DESC, c.run_id, c.tool_name;
