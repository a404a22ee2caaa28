-- Two runs side by side on per-trajectory measures: mean, sd and n of each, the difference
-- B - A with a normal 95% interval (Welch standard error), and Cohen's d. A quick SQL view of
-- what `trajlens compare STORE A B` reports in full (with t intervals, proportion tests and
-- call shares). Needs trajectory_measures (`trajlens classify` or `trajlens report`).
-- Parameters: $run_a (text), $run_b (text).
WITH long AS (
    UNPIVOT (
        SELECT run_id, CAST(num_turns AS DOUBLE) AS num_turns, CAST(model_tokens AS DOUBLE) AS model_tokens,
               CAST(n_calls AS DOUBLE) AS n_calls, think_share, edits_per_turn, readback_share,
               CAST(ran_suite AS DOUBLE) AS ran_suite, CAST(n_format_errors AS DOUBLE) AS n_format_errors
        FROM trajectory_measures WHERE run_id IN ($run_a, $run_b)
    ) ON COLUMNS(* EXCLUDE (run_id)) INTO NAME measure VALUE value
),
sides AS (
    SELECT measure,
           avg(value) FILTER (WHERE run_id = $run_a) AS mean_a,
           stddev_samp(value) FILTER (WHERE run_id = $run_a) AS sd_a,
           count(value) FILTER (WHERE run_id = $run_a) AS n_a,
           avg(value) FILTER (WHERE run_id = $run_b) AS mean_b,
           stddev_samp(value) FILTER (WHERE run_id = $run_b) AS sd_b,
           count(value) FILTER (WHERE run_id = $run_b) AS n_b
    FROM long GROUP BY measure
),
tested AS (
    SELECT *, mean_b - mean_a AS difference,
           sqrt(sd_a * sd_a / n_a + sd_b * sd_b / n_b) AS se,
           sqrt(((n_a - 1) * sd_a * sd_a + (n_b - 1) * sd_b * sd_b) / (n_a + n_b - 2)) AS sd_pooled
    FROM sides WHERE n_a > 1 AND n_b > 1
)
SELECT measure, round(mean_a, 4) AS mean_a, n_a, round(mean_b, 4) AS mean_b, n_b,
       round(difference, 4) AS difference,
       round(difference - 1.959964 * se, 4) AS difference_low, round(difference + 1.959964 * se, 4) AS difference_high,
       round(CASE WHEN sd_pooled > 0 THEN difference / sd_pooled END, 3) AS cohens_d
FROM tested
ORDER BY abs(CASE WHEN sd_pooled > 0 THEN difference / sd_pooled END) DESC NULLS LAST, measure;
