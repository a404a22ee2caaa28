-- What runs the store holds: size, steps, reward and outcome per run.
-- Parameters: none.
SELECT
    r.run_id,
    r.source_format,
    r.estimator,
    count(DISTINCT t.step) AS steps,
    count(*) AS trajectories,
    round(avg(t.reward), 4) AS mean_reward,
    round(avg(CAST(t.resolved AS DOUBLE)), 4) AS resolved_rate,
    round(avg(t.num_turns), 2) AS mean_turns
FROM runs r
JOIN trajectories t USING (run_id)
GROUP BY ALL
ORDER BY r.run_id;
