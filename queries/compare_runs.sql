-- Two runs side by side on the trajectories of their measured split (the measured_splits view:
-- training, or the split a run without training data has), by the definitions of `trajlens
-- compare STORE A B`: a quick SQL view of some of its rows. Per measure: each side's value and n,
-- the difference B - A with its 95% interval, and the effect size. Kinds, as compare has them
-- (each side pooled as the checks pool a measure):
--   mean (num_turns, model_tokens, n_calls, n_format_errors, edits_per_turn, readback_share:
--     compare's mean:<name>): mean over trajectories (nulls and NaNs left out), n trajectories;
--     the difference's normal interval d +- 1.959964 sqrt(sd_a^2 / n_a + sd_b^2 / n_b) (the
--     variance of compare's and the checks' stage test) and Cohen's d on the pooled sd;
--   trajectory_rate (ran_suite): share of trajectories; call_share (think_share, compare's
--     share:think): think calls / calls pooled over trajectories; for both, n is the effective
--     sample size of units clustered in trajectories (Kish), p (1 - p) / var with the cluster
--     variance var = m / (m - 1) sum (x - p n)^2 / N^2 over m trajectories, at most N (N itself
--     below two trajectories); for a share of trajectories it is one less than their number;
--   both with Newcombe's interval from Wilson intervals and Cohen's h.
-- compare adds tests, p-values, more measures, and folds measures with equal numbers into one row.
-- Needs trajectory_measures (`trajlens classify` or `trajlens report`).
-- Parameters: $run_a (text), $run_b (text).
WITH measures AS (
    SELECT m.*
    FROM trajectory_measures m
    JOIN trajectories t USING (run_id, trajectory_id)
    JOIN measured_splits s ON s.run_id = t.run_id AND s.split = t.split
    WHERE m.run_id IN ($run_a, $run_b)
),
long AS (
    UNPIVOT (
        SELECT run_id, CAST(num_turns AS DOUBLE) AS num_turns, CAST(model_tokens AS DOUBLE) AS model_tokens,
               CAST(n_calls AS DOUBLE) AS n_calls, CAST(n_format_errors AS DOUBLE) AS n_format_errors,
               edits_per_turn, readback_share
        FROM measures
    ) ON COLUMNS(* EXCLUDE (run_id)) INTO NAME measure VALUE value
),
means AS (
    SELECT measure, 'mean' AS kind, run_id, avg(value) AS value, stddev_samp(value) AS sd, count(*) AS n
    FROM long WHERE NOT isnan(value)
    GROUP BY measure, run_id
),
units AS (  -- per trajectory: think calls x of calls n (a call share), and ran_suite x of 1 (a rate)
    SELECT run_id, 'think_share' AS measure, 'call_share' AS kind, CAST(count_think AS DOUBLE) AS x,
           CAST(n_calls AS DOUBLE) AS n
    FROM measures WHERE count_think IS NOT NULL AND n_calls IS NOT NULL
    UNION ALL
    SELECT run_id, 'ran_suite', 'trajectory_rate', CAST(ran_suite AS DOUBLE), 1.0 FROM measures WHERE ran_suite IS NOT NULL
),
pooled AS (
    SELECT run_id, measure, kind, sum(x) / sum(n) AS p, sum(n) AS total, count(*) AS m
    FROM units GROUP BY run_id, measure, kind HAVING sum(n) > 0
),
shares AS (
    SELECT p.measure, p.kind, p.run_id, p.p AS value,
           CASE WHEN v.variance > 0 THEN least(p.p * (1 - p.p) / v.variance, p.total) ELSE p.total END AS n
    FROM pooled p
    JOIN (SELECT u.run_id, u.measure,
                 CASE WHEN p.m >= 2 THEN p.m / (p.m - 1) * sum((u.x - p.p * u.n) ^ 2) / p.total ^ 2 END AS variance
          FROM units u JOIN pooled p USING (run_id, measure) GROUP BY u.run_id, u.measure, p.m, p.total) v
        USING (run_id, measure)
),
wilson AS (  -- Wilson score interval of each side's share, z = 1.959963984540054
    SELECT *, greatest(least(centre - half, value), 0) AS low, least(greatest(centre + half, value), 1) AS high
    FROM (
        SELECT *, (value + 3.8414588206941254 / (2 * n)) / (1 + 3.8414588206941254 / n) AS centre,
               1.959963984540054 * sqrt(greatest(value * (1 - value) / n + 3.8414588206941254 / (4 * n * n), 0))
                   / (1 + 3.8414588206941254 / n) AS half
        FROM shares
    )
),
proportions AS (
    SELECT a.measure, a.kind, a.value AS value_a, a.n AS n_a, b.value AS value_b, b.n AS n_b,
           b.value - a.value AS difference,
           greatest(b.value - a.value - sqrt((b.value - b.low) ^ 2 + (a.high - a.value) ^ 2), -1) AS difference_low,
           least(b.value - a.value + sqrt((b.high - b.value) ^ 2 + (a.value - a.low) ^ 2), 1) AS difference_high,
           'Cohen''s h' AS effect,
           2 * asin(sqrt(b.value)) - 2 * asin(sqrt(a.value)) AS effect_size
    FROM wilson a JOIN wilson b ON a.measure = b.measure AND a.run_id = $run_a AND b.run_id = $run_b
),
welch AS (  -- Welch's standard error: the variances of the two means added
    SELECT a.measure, a.value AS value_a, a.n AS n_a, b.value AS value_b, b.n AS n_b,
           b.value - a.value AS difference, sqrt(a.sd * a.sd / a.n + b.sd * b.sd / b.n) AS se,
           sqrt(((a.n - 1) * a.sd * a.sd + (b.n - 1) * b.sd * b.sd) / (a.n + b.n - 2)) AS sd_pooled
    FROM means a JOIN means b ON a.measure = b.measure AND a.run_id = $run_a AND b.run_id = $run_b
),
mean_rows AS (
    SELECT measure, 'mean' AS kind, value_a, n_a, value_b, n_b, difference,
           difference - 1.959963984540054 * se AS difference_low,
           difference + 1.959963984540054 * se AS difference_high,
           'Cohen''s d' AS effect,
           CASE WHEN sd_pooled > 0 THEN difference / sd_pooled END AS effect_size
    FROM welch
)
SELECT measure, kind, round(value_a, 4) AS value_a, round(n_a, 2) AS n_a, round(value_b, 4) AS value_b,
       round(n_b, 2) AS n_b, round(difference, 4) AS difference, round(difference_low, 4) AS difference_low,
       round(difference_high, 4) AS difference_high, effect, round(effect_size, 3) AS effect_size
FROM (SELECT * FROM mean_rows UNION ALL SELECT * FROM proportions)
ORDER BY abs(effect_size) DESC NULLS LAST, measure;
