-- Rollout groups whose members all got the same reward: a group-relative estimator (GRPO, RLOO)
-- gives them zero advantage, so they teach nothing. Per step of one run, on its measured split
-- (the measured_splits view: training, or the split a run without training data has), over groups
-- of two or more rewarded trajectories (null and NaN rewards left out first), as the report's
-- dead-groups table counts them: groups, dead groups, their share, and the mean reward spread
-- (max - min) over all those groups, the dead ones (spread 0) included. Steps without such a
-- group are left out.
-- Parameters: $run_id (text).
WITH groups AS (
    SELECT step, group_id, count(*) AS size, max(reward) - min(reward) AS spread
    FROM trajectories
    JOIN measured_splits USING (run_id, split)
    WHERE run_id = $run_id AND reward IS NOT NULL AND NOT isnan(reward)
    GROUP BY step, group_id
    HAVING count(*) > 1
)
SELECT
    step,
    count(*) AS groups,
    count(*) FILTER (WHERE spread = 0) AS dead_groups,
    round(avg(CAST(spread = 0 AS DOUBLE)), 4) AS dead_group_share,
    round(avg(spread), 4) AS mean_reward_spread
FROM groups
GROUP BY step
ORDER BY step;
