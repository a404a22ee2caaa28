-- Relative credit of each behaviour class per step under each estimator (token-mean loss):
-- the class's mean push minus the step's mean push, in units of the step's mean |push|.
-- Positive: the estimator raised these calls' probability relative to the rest (the r6 think
-- calls in all-negative batches). Needs the class_credit table (`trajlens attribute`).
-- Parameters: $run_id (text).
SELECT
    step,
    primary_class,
    estimator,
    calls,
    round(class_share, 4) AS class_share,
    round(relative_credit_scaled, 4) AS relative_credit_scaled
FROM class_credit
WHERE run_id = $run_id AND aggregation = 'token-mean' AND calls > 0
ORDER BY step, primary_class, estimator;
