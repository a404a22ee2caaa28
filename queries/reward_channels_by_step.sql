-- Each reward channel per step of one run, on its measured split (the measured_splits view:
-- training, or the split a run without training data has): mean and std (NaN values left out, as
-- trajlens.run.channels.channel_step_means and the checks' channel_std:<channel> leave them out),
-- and rel_gain, the mean over
-- the step's groups of two or more trajectories of the channel's max - min in the group (NaN
-- values left out of max and min), as the checks' rel_gain:<channel> and the report's channel
-- findings compute it (trajlens.checks.step_measures.channel_gains); null on a step with no such
-- group. The per-channel signal that tells a saturated channel (rel_gain near 0) from a live one.
-- Parameters: $run_id (text).
WITH channels AS (
    SELECT t.step, t.group_id, c.name AS channel, c.value
    FROM trajectories t
    JOIN measured_splits s ON s.run_id = t.run_id AND s.split = t.split,
         unnest(t.reward_channels) AS u(c)
    WHERE t.run_id = $run_id AND c.name IS NOT NULL
),
groups AS (
    SELECT step, channel, group_id, count(*) AS size,
           max(value) FILTER (WHERE NOT isnan(value)) - min(value) FILTER (WHERE NOT isnan(value)) AS gain
    FROM channels
    GROUP BY step, channel, group_id
),
gains AS (
    SELECT step, channel, avg(gain) AS rel_gain
    FROM groups
    WHERE size >= 2
    GROUP BY step, channel
)
SELECT
    c.step,
    c.channel,
    round(avg(c.value) FILTER (WHERE NOT isnan(c.value)), 4) AS mean,
    round(stddev_samp(c.value) FILTER (WHERE NOT isnan(c.value)), 4) AS std,
    round(any_value(g.rel_gain), 4) AS rel_gain
FROM channels c
LEFT JOIN gains g USING (step, channel)
GROUP BY c.step, c.channel
ORDER BY c.step, c.channel;
