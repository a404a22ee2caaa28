-- Per-step shape of a recomputed advantage batch: mean, std, share of positive tokens, and
-- whether every value was negative (or positive). Needs `trajlens advantages` or `trajlens report`.
-- Parameters: $run_id (text), $estimator (text: the label, such as gae_raw or grpo).
SELECT step, round(mean, 4) AS mean, round(std, 4) AS std, round(positive_share, 4) AS positive_share,
       all_negative, all_positive
FROM advantage_batches
WHERE run_id = $run_id AND estimator = $estimator
ORDER BY step;
