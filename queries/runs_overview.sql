-- What runs the store holds: per run, its steps and trajectories on the training split
-- (split = 'train'), their mean reward (null and NaN rewards left out), resolved rate and mean
-- turns, as the report's summary measures them. A run without training trajectories is listed
-- with 0 trajectories.
-- Parameters: none.
SELECT
    r.run_id,
    r.source_format,
    r.estimator,
    count(DISTINCT t.step) AS steps,
    count(t.trajectory_id) AS trajectories,
    round(avg(t.reward) FILTER (WHERE NOT isnan(t.reward)), 4) AS mean_reward,
    round(avg(CAST(t.resolved AS DOUBLE)), 4) AS resolved_rate,
    round(avg(t.num_turns), 2) AS mean_turns
FROM runs r
LEFT JOIN trajectories t ON t.run_id = r.run_id AND t.split = 'train'
GROUP BY ALL
ORDER BY r.run_id;
