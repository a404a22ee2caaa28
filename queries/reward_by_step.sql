-- Reward, resolution, turns and length per training step of one run.
-- Parameters: $run_id (text).
SELECT
    step,
    count(*) AS trajectories,
    round(avg(reward), 4) AS mean_reward,
    round(avg(CAST(resolved AS DOUBLE)), 4) AS resolved_rate,
    round(avg(num_turns), 2) AS mean_turns,
    round(avg(model_tokens), 1) AS mean_model_tokens,
    round(avg(reasoning_tokens), 1) AS mean_reasoning_tokens
FROM trajectories
WHERE run_id = $run_id AND split = 'train'
GROUP BY step
ORDER BY step;
