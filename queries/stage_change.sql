-- One behaviour metric across the stages of a run, sample beside population, from the last
-- `trajlens sample` or `trajlens report`. Metrics: share:think, ran_suite, verification:quick_check, ...
-- Parameters: $run_id (text), $metric (text).
SELECT stage, round(value, 4) AS sample_value, round(ci_low, 4) AS ci_low, round(ci_high, 4) AS ci_high,
       round(population_value, 4) AS population_value, n_sampled, n_population
FROM stage_rates
WHERE run_id = $run_id AND metric = $metric
ORDER BY stage_index;
