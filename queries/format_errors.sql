-- Turns the agent's harness rejected as malformed, per run and tool: kept in the data,
-- never counted as executed actions.
-- Parameters: none.
SELECT run_id, tool_name, count(*) AS rejected_calls, count(DISTINCT trajectory_id) AS trajectories
FROM tool_calls
WHERE format_error
GROUP BY run_id, tool_name
ORDER BY rejected_calls DESC;
