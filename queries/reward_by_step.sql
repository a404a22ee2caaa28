-- Reward, resolution, turns and length per training step of one run, on the training split
-- (split = 'train'). mean_reward leaves out null and NaN rewards, as the report's trend and
-- summary do; resolved_rate, turns and tokens leave out nulls.
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
WHERE run_id = $run_id AND split = 'train'
GROUP BY step
ORDER BY step;
