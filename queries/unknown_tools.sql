-- Tools to map: per tool name, the executed calls of one run that are classed `other` and carry
-- no shell command (no `command` column, no `command`/`cmd` argument), most-called first. These
-- are the tools no tool map knows, plus any a map sends to `other` on purpose (browser clicks,
-- CTF connections); `trajlens classify` also saves the exact list as the unknown_tools table,
-- and trajlens.classify.unknown_tools() computes it. Map a tool in a TOML tool map
-- (docs/classify.md) and rerun `trajlens classify --tool-map FILE`.
-- Needs the call_classes table (`trajlens classify` or `trajlens report`). Parameters: $run_id (text).
SELECT c.tool_name,
       count(*) AS calls,
       count(DISTINCT c.trajectory_id) AS trajectories,
       min(t.arguments) AS example_arguments
FROM call_classes c
JOIN tool_calls t USING (run_id, trajectory_id, call_index)
WHERE c.run_id = $run_id
  AND c.primary_class = 'other'
  AND t.command IS NULL
  AND json_extract(t.arguments, '$.command') IS NULL
  AND json_extract(t.arguments, '$.cmd') IS NULL
GROUP BY c.tool_name
ORDER BY calls DESC, c.tool_name;
