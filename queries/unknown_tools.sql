-- Which tools to map: every tool of one run with its executed calls, and how many of them no
-- tool map knows (unclassified: classed `other` because no map entry matched and the call
-- carries no shell command), most unclassified first. The unclassified counts are the
-- unknown_tools table that `trajlens classify` saves from trajlens.classify.unknown_tools(), so
-- this query and the classifier name the same tools. A tool whose calls are all unclassified
-- is one no tool map knows; a tool a map sends to `other` on purpose (browser clicks, CTF
-- connections) is not listed as unclassified. Map a tool in a TOML tool map (docs/classify.md)
-- and rerun `trajlens classify --tool-map FILE`. Every split counts: a map applies to all.
-- Needs the call_classes and unknown_tools tables (`trajlens classify` or `trajlens report`).
-- Parameters: $run_id (text).
WITH calls AS (
    SELECT tool_name, count(*) AS calls
    FROM call_classes
    WHERE run_id = $run_id AND primary_class IS NOT NULL
    GROUP BY tool_name
)
SELECT c.tool_name,
       c.calls,
       coalesce(u.calls, 0) AS unclassified_calls,
       coalesce(u.trajectories, 0) AS unclassified_trajectories,
       u.example_arguments
FROM calls c
LEFT JOIN unknown_tools u ON u.run_id = $run_id AND u.tool_name = c.tool_name
ORDER BY unclassified_calls DESC, c.calls DESC, c.tool_name;
