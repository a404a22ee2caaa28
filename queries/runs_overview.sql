-- What runs the store holds: per run, the split it is measured on (the measured_splits view:
-- training, or the split a run without training data has), its steps and trajectories on it,
-- their mean reward (null and NaN rewards left out), resolved rate and mean turns, as the
-- report's summary measures them. A run without trajectories is listed with 0 trajectories.
-- declared_estimator is the estimator name the run's log declares (runs.estimator: verl's
-- algorithm.adv_estimator, gae, grpo, ...); the estimator the run trained with, under the label
-- trajlens recomputes it as, also reads the config's options (gae whitened or not, GRPO's std):
-- `trajlens check` and the report name that one (gae_whitened, grpo_batch_std, ...).
-- Parameters: none.
SELECT
    r.run_id,
    r.source_format,
    r.estimator AS declared_estimator,
    s.split,
    count(DISTINCT t.step) AS steps,
    count(t.trajectory_id) AS trajectories,
    round(avg(t.reward) FILTER (WHERE NOT isnan(t.reward)), 4) AS mean_reward,
    round(avg(CAST(t.resolved AS DOUBLE)), 4) AS resolved_rate,
    round(avg(t.num_turns), 2) AS mean_turns
FROM runs r
LEFT JOIN measured_splits s ON s.run_id = r.run_id
LEFT JOIN trajectories t ON t.run_id = r.run_id AND t.split = s.split
GROUP BY ALL
ORDER BY r.run_id;
