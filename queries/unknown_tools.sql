-- Which tools to map: every tool of one run with its executed calls and how many of them are
-- unclassified (classed `other` and carrying no shell command: no `command` column, no
-- `command`/`cmd` argument), most unclassified first. A tool whose calls are all unclassified
-- is one no tool map knows, or one a map sends to `other` on purpose (browser clicks, CTF
-- connections); `trajlens classify` saves the exact list of unknown tools as the unknown_tools
-- table, and trajlens.classify.unknown_tools() computes it. Map a tool in a TOML tool map
-- (docs/classify.md) and rerun `trajlens classify --tool-map FILE`.
-- Needs the call_classes table (`trajlens classify` or `trajlens report`). Parameters: $run_id (text).
WITH calls AS (
    SELECT c.tool_name, c.trajectory_id, t.arguments,
           c.primary_class = 'other' AND t.command IS NULL
               AND json_extract(t.arguments, '$.command') IS NULL
               AND json_extract(t.arguments, '$.cmd') IS NULL AS unclassified
    FROM call_classes c
    JOIN tool_calls t USING (run_id, trajectory_id, call_index)
    WHERE c.run_id = $run_id AND c.primary_class IS NOT NULL
)
SELECT tool_name,
       count(*) AS calls,
       count(*) FILTER (WHERE unclassified) AS unclassified_calls,
       count(DISTINCT trajectory_id) FILTER (WHERE unclassified) AS unclassified_trajectories,
       min(arguments) FILTER (WHERE unclassified) AS example_arguments
FROM calls
GROUP BY tool_name
ORDER BY unclassified_calls DESC, calls DESC, tool_name;
