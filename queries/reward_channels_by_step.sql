-- Each reward channel per step: mean, std and rel_gain (mean over groups of max - min), the
-- per-channel signal that tells a saturated channel (rel_gain near 0) from a live one.
-- Parameters: $run_id (text).
WITH channels AS (
    SELECT t.step, t.group_id, c.name AS channel, c.value
    FROM trajectories t, unnest(t.reward_channels) AS u(c)
    WHERE t.run_id = $run_id AND t.split = 'train'
),
groups AS (
    SELECT step, channel, group_id, max(value) - min(value) AS gain
    FROM channels
    GROUP BY step, channel, group_id
)
SELECT
    c.step,
    c.channel,
    round(avg(c.value), 4) AS mean,
    round(stddev_samp(c.value), 4) AS std,
    round((SELECT avg(g.gain) FROM groups g WHERE g.step = c.step AND g.channel = c.channel), 4) AS rel_gain
FROM channels c
GROUP BY c.step, c.channel
ORDER BY c.step, c.channel;
