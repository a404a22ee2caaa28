-- Rollout groups whose members all got the same reward: a group-relative estimator (GRPO,
-- RLOO) gives them zero advantage, so they teach nothing. Share per step of one run.
-- Parameters: $run_id (text).
WITH groups AS (
    SELECT step, group_id, count(*) AS size, max(reward) - min(reward) AS spread
    FROM trajectories
    WHERE run_id = $run_id AND split = 'train'
    GROUP BY step, group_id
)
SELECT
    step,
    count(*) AS groups,
    round(avg(CAST(size > 1 AND spread = 0 AS DOUBLE)), 4) AS dead_group_share,
    round(avg(spread), 4) AS mean_reward_spread
FROM groups
GROUP BY step
ORDER BY step;
