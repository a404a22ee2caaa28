-- How the agent checks its work, per step of one run: full suite, targeted tests, quick
-- python -c / heredoc checks, scripts (shares of verification calls), and the share of
-- trajectories that ran the whole suite at least once. Needs `trajlens classify`.
-- Parameters: $run_id (text).
WITH calls AS (
    SELECT step, primary_class
    FROM call_classes
    WHERE run_id = $run_id AND is_verification
),
mix AS (
    SELECT
        step,
        count(*) AS verification_calls,
        round(avg(CAST(primary_class = 'test_suite' AS DOUBLE)), 4) AS suite,
        round(avg(CAST(primary_class = 'test_targeted' AS DOUBLE)), 4) AS targeted,
        round(avg(CAST(primary_class = 'quick_check' AS DOUBLE)), 4) AS quick_check,
        round(avg(CAST(primary_class = 'run_script' AS DOUBLE)), 4) AS run_script
    FROM calls
    GROUP BY step
)
SELECT mix.*, round(avg(CAST(m.ran_suite AS DOUBLE)), 4) AS suite_run_rate
FROM mix
JOIN trajectory_measures m ON m.run_id = $run_id AND m.step = mix.step
GROUP BY ALL
ORDER BY mix.step;
