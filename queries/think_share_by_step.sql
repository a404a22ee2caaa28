-- Think share per step of one run: think calls / all executed tool calls (format errors
-- excluded), pooled over the step's trajectories of the run's measured split (the measured_splits
-- view: training, or the split a run without training data has), as the checks' share:think and
-- the report measure it: the r6 collapse signal (0.075 over steps 1-50, single steps 0.05-0.10;
-- 0.72-0.75 at collapse, steps 130-135). Steps without executed calls are left out. Needs the call_classes table (`trajlens classify`).
-- Parameters: $run_id (text).
SELECT
    c.step,
    count(*) AS calls,
    count(*) FILTER (WHERE c.primary_class = 'think') AS think_calls,
    round(count(*) FILTER (WHERE c.primary_class = 'think') / count(*), 4) AS think_share
FROM call_classes c
JOIN trajectories t USING (run_id, trajectory_id)
JOIN measured_splits s ON s.run_id = t.run_id AND s.split = t.split
WHERE c.run_id = $run_id AND c.primary_class IS NOT NULL
GROUP BY c.step
ORDER BY c.step;
