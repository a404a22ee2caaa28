-- Reward, resolution, turns and length per training step of one run, on its measured split (the
-- measured_splits view: training, or the split a run without training data has). mean_reward
-- leaves out null and NaN rewards, as the report's trend and summary do; resolved_rate, turns and
-- tokens leave out nulls.
-- Parameters: $run_id (text).
SELECT
    step,
    count(*) AS trajectories,
    round(avg(reward) FILTER (WHERE NOT isnan(reward)), 4) AS mean_reward,
    round(avg(CAST(resolved AS DOUBLE)), 4) AS resolved_rate,
    round(avg(num_turns), 2) AS mean_turns,
    round(avg(model_tokens), 1) AS mean_model_tokens,
    round(avg(reasoning_tokens), 1) AS mean_reasoning_tokens
FROM trajectories
JOIN measured_splits USING (run_id, split)
WHERE run_id = $run_id
GROUP BY step
ORDER BY step;
