-- How the agent checks its work, per step of one run, on its measured split (the measured_splits
-- view: training, or the split a run without training data has): verification calls (calls whose
-- primary class is test_suite, test_targeted, quick_check or run_script), each class's share of
-- them pooled over the step's trajectories (the checks' verification:<class>; null on a step
-- without verification calls), and the share of the step's trajectories that ran the whole suite
-- at least once in any action (the checks' ran_suite). Every step with measured trajectories has
-- a row. Needs `trajlens classify`.
-- Parameters: $run_id (text).
SELECT
    m.step,
    CAST(sum(m.n_verification) AS BIGINT) AS verification_calls,
    round(sum(m.count_test_suite) / nullif(sum(m.n_verification), 0), 4) AS suite,
    round(sum(m.count_test_targeted) / nullif(sum(m.n_verification), 0), 4) AS targeted,
    round(sum(m.count_quick_check) / nullif(sum(m.n_verification), 0), 4) AS quick_check,
    round(sum(m.count_run_script) / nullif(sum(m.n_verification), 0), 4) AS run_script,
    round(avg(CAST(m.ran_suite AS DOUBLE)), 4) AS suite_run_rate
FROM trajectory_measures m
JOIN trajectories t USING (run_id, trajectory_id)
JOIN measured_splits s ON s.run_id = t.run_id AND s.split = t.split
WHERE m.run_id = $run_id
GROUP BY m.step
ORDER BY m.step;
