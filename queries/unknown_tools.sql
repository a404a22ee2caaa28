-- Tools no tool map knows, most-called first: every call of theirs is classed `other`.
-- Map them in a TOML tool map (docs/classify.md) and rerun `trajlens classify --tool-map FILE`.
-- Needs the unknown_tools table (`trajlens classify`). Parameters: $run_id (text).
SELECT tool_name, calls, trajectories, example_arguments
FROM unknown_tools
WHERE run_id = $run_id
ORDER BY calls DESC, tool_name;
