"""The behaviour taxonomy as data: classes, tool-name tables and shell-command rules.

Everything the classifier decides is written down here, so a reader can see the rules and a
user can extend them (``dataclasses.replace`` a table, or add a :class:`Rule`) without reading
the engine. Bump :data:`RULES_VERSION` whenever a rule changes what a command is labelled.

How a tool call becomes behaviour
---------------------------------
1. Calls the harness rejected (``format_error``) get no class at all and stay out of every
   share: they were never executed.
2. A tool map decides when it can (:mod:`trajlens.classify.tool_map`; the shipped maps are in
   ``trajlens/classify/tool_maps/``, a user's map is tried first): the first entry whose tool
   name (exact, glob or regex, case-insensitive), argument patterns and command pattern all
   match gives the class. ``think`` is think, ``finish``/``submit`` are submit, SWE-agent's
   ``open``/``edit``/``find_file`` ... have fixed classes, file editors are classed by their
   sub-command (``view`` is view, ``create``/``str_replace``/... are edit), ``search`` is
   search. Entries of class ``shell`` (``bash``, ``execute_bash``) hand the call to the shell
   rules, as does any unmapped tool that carries a command; an unmapped tool without one is
   ``other``.
3. Otherwise the shell command is split into actions: one per segment of a chain (``&&``,
   ``||``, ``;``, ``&``, newlines) and per stage of a pipeline. Heredoc bodies, quoted strings
   and ``$(...)`` are hidden first so their contents never split or match anything;
   ``bash -lc '...'`` is unwrapped. A later pipeline stage that only filters its input
   (:data:`PIPE_FILTERS`: ``| tail -20``, ``| grep x``) is not an action, nor is a segment that
   only changes the shell's state (:data:`NOT_ACTIONS`: ``cd DIR``, ``export X=1``).
4. Each action gets the class of the first :data:`SHELL_RULES` entry whose pattern matches
   its normalised text; ``other`` when none does. An action that redirects output into a
   file (``> f``, ``>> f``) is at least an edit.
5. The call's primary class is its highest-priority action class, in the order of
   :data:`BEHAVIOUR_CLASSES`; a call with no action at all (``cd /testbed``) is ``other``.

Normalised action text
----------------------
Rules match the text of one action after these rewrites, so patterns stay short:

* quoted strings become ``__Q__`` unless they are a single plain word (``"tests/x.py"`` is
  unquoted to ``tests/x.py``); ``$(...)`` and backticks become ``__S__``;
* a heredoc becomes the marker ``__HEREDOC__`` (its body removed, up to the first line that
  holds its delimiter alone, blanks around it allowed; to the end when no line does), ``<<<``
  becomes ``__HERESTRING__``;
* redirections are removed (and remembered), as are leading ``VAR=value`` assignments and
  wrappers such as ``timeout 60``, ``sudo``, ``env``, ``uv run`` (:data:`WRAPPER_PATTERN`);
* ``/usr/bin/python3.11 -u -W ignore`` becomes ``python``, ``coverage run`` becomes
  ``python``, ``py.test`` becomes ``pytest``.

So ``cd /testbed && timeout 300 python3 -m pytest "tests/test_x.py" -k 'a or b' 2>&1 | tail``
has one action, normalised to ``python -m pytest tests/test_x.py -k __Q__``.
"""

from __future__ import annotations

from dataclasses import dataclass

RULES_VERSION = "1.8"
"""Version of the taxonomy, the shell rules and the shipped tool maps; stored beside every
classification. 1.8: formatters that rewrite files (``black``, ``isort``, ``ruff format``, ``ruff
check --fix``, ``autopep8 -i``, ``prettier --write``, ``gofmt -w``, ...) are edits, run with
``--check`` or ``--diff`` they change nothing (``other``); a file named without an extension or
a folder that is a file by its name (``Makefile``, ``Dockerfile``: :data:`~trajlens.classify._syntax.FILE_NAMES`)
is a path. 1.7: ``pytest -h`` runs no test; ``git apply --check``, ``git clean -n``,
``git rm --cached`` and ``git restore --staged`` change no file; pytest given a ``.rst``, ``.txt``
or ``.md`` file runs its doctests (targeted), as ``unittest discover -p test_x.py`` runs one
file's; ``sudo -u user`` and ``bash -o pipefail -c '...'`` are unwrapped. 1.5: ``gunzip``,
``unzip`` and ``tar -x`` (archives unpacked into files) are edits.
1.4: ``pytest --collect-only`` (``--co``, ``--fixtures``, ``--markers``) lists tests and runs none
(``other``); ``python -m coverage run`` is unwrapped as ``coverage run`` is. 1.3: a word built partly from a quoted string or a command substitution
(``"$D"/d.py``, ``$(pwd)/x.py``) is no path. 1.2: tool maps (TOML) replace the tool-name tables; browsers, search engines,
calculators, MCP ``server__tool`` names and SWE-agent's CTF tools are mapped; fixed-class
tools take their path from the JSON arguments; commands are classified on their first
:data:`~trajlens.classify._syntax.MAX_COMMAND_CHARS` characters."""

BEHAVIOUR_CLASSES: tuple[str, ...] = (
    "submit",
    "test_suite",
    "test_targeted",
    "quick_check",
    "run_script",
    "edit",
    "view",
    "search",
    "think",
    "other",
)
"""Behaviour classes in priority order: a call's primary class is the first one present."""

CLASS_DESCRIPTIONS: dict[str, str] = {
    "submit": "ends the episode (submit, finish, echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT)",
    "test_suite": "a test runner over the whole suite or whole directories",
    "test_targeted": "a test runner narrowed to named files, modules, classes, node ids or a -k/-m selection",
    "quick_check": "interpreter code given inline (python -c, python - <<EOF)",
    "run_script": "runs a script file that is not a test runner (python reproduce.py, bash run.sh)",
    "edit": "creates or changes files (sed -i, cat > f <<EOF, editor create/str_replace, mv/cp/rm)",
    "view": "prints the contents of named files (cat f, sed -n '1,80p' f, editor view, open)",
    "search": "locates files or text (grep, rg, find, ls, tree, find_file, search_dir)",
    "think": "a tool whose only effect is recording reasoning or a plan (think, task_tracker)",
    "other": "anything else (pip install, git status, git diff, echo hi)",
}

VERIFICATION_CLASSES: tuple[str, ...] = ("test_suite", "test_targeted", "quick_check", "run_script")
"""Classes that run code to check the work; their mix is the verification profile."""

TEST_RUNNER_CLASSES: tuple[str, ...] = ("test_suite", "test_targeted")

PRIORITY: dict[str, int] = {name: index for index, name in enumerate(BEHAVIOUR_CLASSES)}

SHELL_RULES_SOURCE = "trajlens/classify/rules.py"
"""Where the shell rules are declared: the ``rule_source`` of a call a shell rule decided."""
REDIRECT_RULE = "redirect-to-file"
"""The rule name of an action made an edit by an output redirection (``git diff > f``)."""
NO_RULE = "no-rule"
"""The rule name of an action no shell rule matched (class ``other``)."""


# --- tool arguments --------------------------------------------------------------------------
# Which tool decides what is data in the tool maps (trajlens/classify/tool_maps/*.toml, read by
# trajlens.classify.tool_map); these are the argument keys the classifier reads.

SHELL_ARGUMENT_KEYS: tuple[str, ...] = ("command", "cmd")
"""JSON keys read as the shell command when the ``command`` column is null."""

PATH_ARGUMENT_KEYS: tuple[str, ...] = ("path", "file_path", "filename", "file_name")
"""JSON keys read as the file a non-shell tool touches."""


# --- shell parsing tables ---------------------------------------------------------------------

NOT_ACTIONS: frozenset[str] = frozenset(
    {
        "cd", "pushd", "popd", "export", "source", ".", "set", "unset", "alias", "unalias",
        "true", ":", "fi", "done", "esac", "for", "case", "select", "function", "wait",
        "shopt", "ulimit", "trap", "[", "[[", "local", "declare", "typeset", "readonly",
        "{", "}", "then", "do", "else", "in",
    }
)
"""Commands that only change the shell's own state (or are syntax): never an action."""

PIPE_FILTERS: frozenset[str] = frozenset(
    {
        "head", "tail", "grep", "egrep", "fgrep", "rg", "sed", "awk", "gawk", "sort", "uniq",
        "wc", "cut", "tr", "cat", "less", "more", "nl", "column", "jq", "fold", "rev", "tac",
        "xxd", "od", "fmt", "expand", "paste", "strings", "diff", "ts", "pv",
    }
)
"""Commands that, after a ``|``, only filter what the previous stage printed. A filter that
writes a file (``| grep x > out``) or edits in place (``| sed -i``) is still an action."""

WRAPPER_PATTERN = (
    r"^(?:sudo(?:\s+-[a-zA-Z]*[ugCDprtTU]\s+[^\s-]\S*|\s+--(?:user|group|chdir|prompt)\s+[^\s-]\S*|\s+-\S+)*|nohup|time|command|exec|builtin|nice(?:\s+-n\s*-?\d+|\s+-\d+)?"
    r"|stdbuf(?:\s+-\S+)+|timeout(?:\s+-[ks]\s+\w+|\s+-\S+)*\s+\d+(?:\.\d+)?[smhd]?|env(?:\s+-\S+)*"
    r"|xvfb-run(?:\s+-\S+)*|(?:uv|poetry|pipenv|pdm|hatch|rye)\s+run"
    r"|conda\s+run(?:\s+(?:-n|--name|-p|--prefix)\s+\S+|\s+--\S+)*"
    r"|[A-Za-z_]\w*=\S*)\s+"
)
"""A prefix that runs the rest of the line unchanged; stripped (repeatedly) before matching."""

PROJECT_CLIS: tuple[str, ...] = (
    "sqlfluff", "pylint", "pyreverse", "symilar", "epylint", "sphinx-build", "sphinx-quickstart",
    "sphinx-apidoc", "sphinx-autogen", "fitsheader", "fitscheck", "fitsdiff", "flask", "isympy",
)
"""Command-line entry points of the projects agents work on (SWE-bench's pylint, sphinx,
sqlfluff, astropy, flask, sympy): running one on an input reproduces or checks the work, as
``python -m pylint x.py`` does, so it is run_script."""


# --- shell rules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One shell-command rule: the normalised action text matching ``pattern`` gets ``klass``.

    Rules are tried in order and the first match wins, so narrow rules come before broad ones
    (targeted test runs before suite runs, ``pytest --version`` before ``pytest``).
    """

    name: str
    """Short identifier, unique within :data:`SHELL_RULES`."""
    klass: str
    """Behaviour class given to a matching action."""
    pattern: str
    """Regular expression (Rust ``regex`` / Python ``re`` common subset: no look-around, no
    back-references) searched in the normalised action text."""
    strip: str | None = None
    """Optional pattern removed (replaced by a space) from the text before ``pattern`` is
    searched: option values that would look like test selections (``-W ignore::Warning``)."""
    doc: str = ""
    """What the rule recognises, with an example."""


# Options of pytest whose value is a separate word; removed before judging narrowing.
_PYTEST_VALUE_OPTIONS = (
    r"\s(?:-[Wpocn]|--(?:tb|durations|maxfail|timeout|rootdir|basetemp|cov|cov-report|cov-config"
    r"|junitxml|junit-xml|confcutdir|ignore|ignore-glob|deselect|log-level|log-cli-level|color"
    r"|import-mode|capture|override-ini|reruns|count|dist|numprocesses|random-order-seed|benchmark-\w+"
    r"|log-file|report-log|resultlog|doctest-glob|junit-prefix|md-report-output))"
    r"\s+\S+|\s--?[\w-]+=\S*"
)
_PYTEST = r"^(?:pytest|python -m pytest)(?:\s|$)"
# `pytest --pyargs pkg.tests.test_x`: a dotted test module names a file.
_PYARGS_TEST_MODULE = r"(?:\w+\.)+(?:test_\w+|\w+_tests?)(?:\.\w+)*"
_PYTEST_ARGUMENT = r"^(?:pytest|python -m pytest)(?:\s.*)?\s"
# Django's runtests.py and SymPy's bin/test take labels as positional words.
_DJANGO_VALUE_OPTIONS = (
    r"\s(?:--settings|--parallel|--verbosity|-v|--exclude-tag|--tag|--start-at|--start-after"
    r"|--bisect|--pair|--shuffle|--timeout|--seed|--split)\s+[^\s-]\S*"
)
_LABEL_RUNNER = r"^(?:python\s+)?(?:\S*/)?(?:runtests\.py|bin/test|bin/doctest)"

SHELL_RULES: tuple[Rule, ...] = (
    # -- episode end
    Rule("submit-echo", "submit",
         r"^echo(?:\s+-\w+)*\s+(?:COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT|MINI_SWE_AGENT_FINAL_OUTPUT)\b",
         doc="mini-swe-agent's submission line: echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"),
    Rule("submit-command", "submit", r"^submit(?:\s|$)", doc="SWE-agent's submit command"),
    # -- version and help queries run nothing
    Rule("version-query", "other", r"^\S+(?:\s+-m\s+\S+)?(?:\s+[a-z][\w-]*)?\s+(?:--version|-V|--help)$",
         doc="python --version, pytest --version, sqlfluff parse --help"),
    # -- pytest
    Rule("pytest-collect", "other",
         _PYTEST_ARGUMENT + r"(?:--collect-only|--co|--fixtures|--fixtures-per-test|--markers|-h|--help)(?:\s|$)",
         doc="pytest --co -q, python -m pytest --collect-only tests/, pytest -h (lists tests, fixtures or options, runs none)"),
    Rule("pytest-selected", "test_targeted", _PYTEST_ARGUMENT + r"(?:-k|-m|--keyword)(?:\s|$)",
         strip=_PYTEST_VALUE_OPTIONS, doc="pytest -k foo, python -m pytest -m slow"),
    Rule("pytest-files", "test_targeted", _PYTEST_ARGUMENT + r"(?:\S*\.(?:py|rst|txt|md)(?:\s|$|::|\[)|\S*::\S|__Q__(?:\s|$)|\$\{?\w+\}?(?:\s|$))",
         strip=_PYTEST_VALUE_OPTIONS,
         doc="pytest tests/test_x.py, pytest a.py::test_b, pytest $f (a quoted argument or a variable names tests), "
             "pytest README.rst (its doctests)"),
    Rule("pytest-pyargs", "test_targeted",
         _PYTEST_ARGUMENT + r"(?:(?:.*\s)?--pyargs\s(?:.*\s)?" + _PYARGS_TEST_MODULE + r"|" + _PYARGS_TEST_MODULE
         + r"\s(?:.*\s)?--pyargs)(?:\s|$)",
         strip=_PYTEST_VALUE_OPTIONS, doc="pytest --pyargs pkg.tests.test_x"),
    Rule("pytest-suite", "test_suite", _PYTEST,
         doc="pytest, pytest -x -q, python -m pytest tests/ (directories alone are the suite)"),
    # -- unittest
    Rule("unittest-selected", "test_targeted", r"^python -m unittest\s.*-k(?:\s|$)",
         doc="python -m unittest -k foo"),
    Rule("unittest-discover-file", "test_targeted",
         r"^python -m unittest\s+discover\s(?:.*\s)?(?:-p|--pattern)\s+[\w./-]+\.py(?:\s|$)",
         doc="python -m unittest discover -s tests -p test_json.py (a pattern without wildcards names one file)"),
    Rule("unittest-named", "test_targeted", r"^python -m unittest(?:\s+-\S+)*\s+[^\s-]",
         strip=r"\sdiscover(?:\s.*)?$",
         doc="python -m unittest tests.test_x (discover and its options are the suite)"),
    Rule("unittest-suite", "test_suite", r"^python -m unittest(?:\s|$)",
         doc="python -m unittest, python -m unittest discover -s tests"),
    # -- Django's runtests.py and SymPy's bin/test: any label narrows
    Rule("label-runner-selected", "test_targeted", _LABEL_RUNNER + r"\s.*-k(?:\s|$)",
         doc="./tests/runtests.py -k test_x"),
    Rule("label-runner-named", "test_targeted",
         _LABEL_RUNNER + r"(?:\s.*)?\s(?:[^\s/-][^\s/]*|\S*\.py\S*)(?:\s|$)", strip=_DJANGO_VALUE_OPTIONS,
         doc="python tests/runtests.py model_fields, bin/test sympy/core/tests/test_x.py, bin/test test_basic "
             "(a label, module or file; a directory alone is the suite)"),
    Rule("label-runner-suite", "test_suite", _LABEL_RUNNER + r"(?:\s|$)",
         doc="./tests/runtests.py, bin/test with no labels"),
    Rule("django-manage-named", "test_targeted",
         r"^(?:(?:python\s+)?(?:\S*/)?manage\.py|django-admin|python -m django)\s+test(?:\s+-\S+)*\s+[^\s-]",
         strip=_DJANGO_VALUE_OPTIONS, doc="python manage.py test app.tests"),
    Rule("django-manage-suite", "test_suite",
         r"^(?:(?:python\s+)?(?:\S*/)?manage\.py|django-admin|python -m django)\s+test(?:\s|$)",
         doc="python manage.py test"),
    # -- tox, nox, setup.py test and other ecosystems' runners
    Rule("tox-files", "test_targeted", r"^(?:python -m )?tox(?:\s.*)?\s--\s(?:.*\.py\b|.*::|(?:.*\s)?-[km](?:\s|$))",
         doc="tox -e py39 -- tests/test_x.py, tox -- -k name"),
    Rule("tox-nox-suite", "test_suite", r"^(?:python -m )?(?:tox|nox)(?:\s|$)",
         doc="tox, tox -e py39, nox -s tests, python -m tox"),
    Rule("setup-py-test", "test_suite", r"^python (?:\S*/)?setup\.py\s+test(?:\s|$)", doc="python setup.py test"),
    Rule("setup-py-build", "other", r"^python (?:\S*/)?setup\.py(?:\s|$)", doc="python setup.py build_ext --inplace"),
    Rule("nose-named", "test_targeted", r"^(?:nosetests|python -m nose)(?:\s.*)?\s(?:\S*\.py\S*|\S*:\S+)(?:\s|$)",
         doc="nosetests tests/test_x.py, nosetests pkg.tests:TestX"),
    Rule("nose-suite", "test_suite", r"^(?:nosetests|python -m nose)(?:\s|$)", doc="nosetests"),
    Rule("go-test-run", "test_targeted", r"^go\s+test\s.*-run(?:\s|=)", doc="go test -run TestX ./..."),
    Rule("cargo-test-named", "test_targeted", r"^cargo\s+test(?:\s+-\S+)*\s+[^\s-]", doc="cargo test name"),
    Rule("js-runner-files", "test_targeted",
         r"^(?:(?:npx\s+)?(?:jest|mocha|vitest)|(?:npm|yarn|pnpm)\s+(?:run\s+)?test(?:\s.*)?\s--)"
         r"(?:\s.*)?\s(?:\S*\.[jt]sx?\b|-t\s|--grep\s)",
         doc="jest src/x.test.js, npm test -- x.test.js"),
    Rule("other-runner-suite", "test_suite",
         r"^(?:go\s+test|cargo\s+test|(?:npx\s+)?(?:jest|mocha|vitest)|(?:npm|yarn|pnpm)\s+(?:run\s+)?test"
         r"|make\s+(?:test|check)|mvn\s+test|(?:\./)?gradlew?\s+test)(?:\s|$)",
         doc="go test ./..., cargo test, npm test, make test"),
    Rule("test-script-named", "test_targeted",
         r"^(?:(?:bash|sh)(?:\s+-\S+)*\s+)?(?:\S*/)?run_?tests?\.sh(?:\s+-\S+)*\s+[^\s-]",
         doc="bash run_tests.sh tests/test_x.py (a repository's test script given tests)"),
    Rule("test-script-suite", "test_suite", r"^(?:(?:bash|sh)(?:\s+-\S+)*\s+)?(?:\S*/)?run_?tests?\.sh(?:\s|$)",
         doc="bash run_tests.sh, ./run_tests.sh (R2E-Gym's and many repositories' whole-suite script)"),
    # -- a test file or test module run directly
    Rule("python-test-file", "test_targeted",
         r"^python\s+(?:\S*/)?tests?/(?:\S*/)?(?:test_\w+|unittest_\w+|\w+_tests?|tests)\.py(?:\s|$)",
         doc="python tests/test_x.py, python tests/unittest_x.py (astroid's and pylint's naming): a test module inside a tests/ folder"),
    Rule("doctest-file", "test_targeted", r"^python -m doctest(?:\s+-\S+)*\s+[^\s-]", doc="python -m doctest -v README.rst"),
    Rule("python-test-module", "test_targeted", r"^python -m (?:\w+\.)*tests?\.(?:\w+\.)*(?:test_\w+|unittest_\w+|\w+_tests?)(?:\s|$)",
         doc="python -m pkg.tests.test_x, python -m tests.unittest_x"),
    # -- inline interpreter code
    Rule("python-inline", "quick_check", r"^python\s+-c(?:\s|$)", doc='python -c "..."'),
    Rule("python-stdin", "quick_check", r"^python(?:$|\s+-(?:\s|$)|\s+__HERE(?:DOC|STRING)__(?:\s|$))",
         doc="python3 - <<'EOF', python3 <<EOF, python - arg <<EOF, ... | python"),
    Rule("perl-in-place", "edit", r"^perl\s(?:.*\s)?-[a-zA-Z]*i", doc="perl -pi -e 's/a/b/' f"),
    Rule("other-inline", "quick_check", r"^(?:node|ruby|perl|php)(?:\s+-\S+)*\s+-[a-zA-Z]*[eEr](?:\s|$)",
         doc="node -e, ruby -e, perl -lpe"),
    Rule("shell-stdin", "quick_check",
         r"^(?:bash|sh|zsh|node|ruby|perl)(?:\s+-\S+)*(?:\s+__HERE(?:DOC|STRING)__(?:\s|$)|$)",
         doc="bash <<EOF, ... | sh"),
    # -- formatters: they rewrite the files they are given, unless asked only to report
    Rule("formatter-report", "other",
         r"^(?:python -m )?(?:black|isort|ruff(?:\s+format|\s+check)?|rustfmt|cargo\s+fmt)\s(?:.*\s)?"
         r"(?:--check|--check-only|--diff)(?:\s|$)",
         doc="black --check ., ruff format --diff x.py, isort --check-only x.py (they report, change no file)"),
    Rule("formatter-in-place", "edit",
         r"^(?:python -m )?(?:black|isort|ruff\s+format|rustfmt|cargo\s+fmt)(?:\s|$)"
         r"|^(?:python -m )?ruff(?:\s+check)?\s(?:.*\s)?--fix(?:\s|$)"
         r"|^(?:python -m )?(?:autopep8|yapf|autoflake)\s(?:.*\s)?(?:-[a-zA-Z]*i[a-zA-Z]*|--in-place)(?:\s|$)"
         r"|^(?:npx\s+)?prettier\s(?:.*\s)?(?:--write|-w)(?:\s|$)"
         r"|^gofmt\s(?:.*\s)?-[a-z]*w[a-z]*(?:\s|$)|^clang-format\s(?:.*\s)?-i(?:\s|$)",
         doc="black x.py, python -m isort ., ruff format, ruff check --fix, autopep8 -i x.py, prettier --write ., "
             "gofmt -w x.go"),
    # -- scripts
    Rule("python-tool-module", "other",
         r"^python -m (?:pip|venv|virtualenv|ensurepip|http\.server|pydoc|site|json\.tool|compileall"
         r"|py_compile|sysconfig|platform|pip\._internal)(?:\s|$)",
         doc="python -m pip install ..., python -m http.server"),
    Rule("python-module", "run_script", r"^python -m \S", doc="python -m pylint x.py, python -m mypkg"),
    Rule("python-script", "run_script", r"^python\s+[^\s-]", doc="python reproduce.py"),
    Rule("shell-script", "run_script", r"^(?:bash|sh|zsh)(?:\s+-\S+)*\s+[^\s-]", doc="bash run.sh"),
    Rule("other-script", "run_script", r"^(?:node|ruby|perl|php|Rscript|julia|deno|ts-node|tsx)(?:\s+-\S+)*\s+[^\s-]",
         doc="node index.js"),
    Rule("project-cli", "run_script", r"^(?:" + "|".join(PROJECT_CLIS) + r")(?:\s|$)",
         doc="sqlfluff lint test.sql, sphinx-build -b html docs out: the code under work, run on an input"),
    Rule("path-program", "run_script", r"^(?:\.{0,2}/|[\w.-]+/)\S", doc="./run.sh, /workspace/tool, build/app"),
    # -- edits
    Rule("sed-in-place", "edit", r"^sed\s(?:.*\s)?(?:-[a-zA-Z]*i[a-zA-Z.]*|--in-place\S*)(?:\s|$)",
         doc="sed -i 's/a/b/' f, sed -i.bak ..."),
    Rule("awk-in-place", "edit", r"^g?awk\s(?:.*\s)?-i\s+inplace(?:\s|$)", doc="awk -i inplace ..."),
    Rule("file-changing-command", "edit",
         r"^(?:cp|mv|rm|touch|truncate|ln|rmdir|unlink|install|dd|shred|gunzip)(?:\s|$)",
         doc="mv a b, cp a b, rm f, touch f, gunzip f.gz (mkdir is other: an empty folder is no change git sees)"),
    Rule("archive-extract", "edit",
         r"^unzip(?:\s+-[a-km-su-zA-Z]+)*\s+[^\s-]"
         r"|^tar\s+(?:[a-wyz]*x[a-z]*|(?:.*\s)?(?:-[a-zA-Z]*x[a-zA-Z]*|--extract|--get))(?:\s|$)",
         doc="unzip a.zip, tar -xzf a.tgz, tar xf a.tar (unzip -l and tar -t only list)"),
    Rule("tee-file", "edit", r"^tee(?:\s+-\S+)*\s+[^\s-]", doc="... | tee f"),
    Rule("patch", "edit", r"^(?:patch|apply_?patch)(?:\s|$)",
         doc="patch -p1 < fix.patch, apply_patch <<'EOF' *** Begin Patch ..."),
    Rule("line-editor", "edit", r"^(?:ed|ex)(?:\s|$)", doc="ed -s f.py <<< $'...\\nw', ex -sc '%s/a/b/|x' f.py"),
    Rule("git-apply-as-well", "edit", r"^git\s+apply\s(?:.*\s)?--apply(?:\s|$)",
         doc="git apply --stat --apply fix.patch (--apply applies the patch as well as --check or --stat)"),
    Rule("git-no-file-change", "other",
         r"^git\s+apply\s(?:.*\s)?(?:--check|--stat|--numstat|--summary)(?:\s|$)"
         r"|^git\s+clean\s(?:.*\s)?(?:-[a-zA-Z]*n[a-zA-Z]*|--dry-run)(?:\s|$)"
         r"|^git\s+rm\s(?:.*\s)?--cached(?:\s|$)"
         r"|^git\s+restore(?:\s+(?:-q|--quiet))*\s+(?:--staged|-S)(?:\s+(?:--staged|-S|-q|--quiet))*\s+[^\s-]",
         doc="git apply --check fix.patch, git clean -n, git rm --cached f, git restore --staged f "
             "(a dry run, or the index alone: no file changes)"),
    Rule("git-file-change", "edit",
         r"^git\s+(?:apply|am|restore|cherry-pick|revert|mv|rm|clean)(?:\s|$)"
         r"|^git\s+checkout\s+(?:.*\s)?(?:--(?:\s|$)|\S*[./]\S*)|^git\s+reset\s.*--hard"
         r"|^git\s+stash(?:\s+(?:push|pop|apply|drop|save|-\S+)|$)",
         doc="git apply, git checkout -- f, git checkout f.py, git stash, git reset --hard"),
    Rule("find-delete", "edit",
         r"^find\s.*\s(?:-delete|-exec(?:dir)?\s+rm)(?:\s|$)|^find\s.*\s-exec(?:dir)?\s+(?:sed|perl)\s(?:.*\s)?-[a-zA-Z]*i",
         doc="find . -name '*.pyc' -delete, find src -name '*.py' -exec sed -i 's/a/b/' {} +"),
    Rule("swe-agent-edit", "edit", r"^(?:edit|insert|append|create)(?:\s|$)",
         doc="SWE-agent edit 10:12 / insert / create f"),
    Rule("editor-edit", "edit", r"^str_replace_editor\s+(?:create|str_replace|insert|undo_edit)(?:\s|$)",
         doc="str_replace_editor create /path (SWE-agent action text)"),
    # -- views
    Rule("editor-view", "view", r"^str_replace_editor\s+view(?:\s|$)", doc="str_replace_editor view /path"),
    Rule("swe-agent-view", "view", r"^(?:open|goto|scroll_up|scroll_down|filemap)(?:\s|$)", doc="open f.py 120"),
    Rule("cat-heredoc", "other", r"^cat(?:\s+-\S+)*\s+__HERE(?:DOC|STRING)__$",
         doc="cat <<EOF without a redirect only echoes its body"),
    Rule("print-file", "view",
         r"^(?:cat|head|tail|less|more|nl|bat|batcat|tac|xxd|hexdump|od|strings|view|sort|uniq|column|fold|rev)"
         r"(?:\s+-\S+)*(?:\s+-[nc]\s+\S+)?(?:\s+-\S+)*\s+[^\s-]",
         doc="cat f, head -n 50 f, nl -ba f, tail -f log"),
    Rule("pdf-to-stdout", "view", r"^pdftotext\s.*\s-$", doc="pdftotext report.pdf - (prints the text)"),
    Rule("sed-print", "view", r"^sed(?:\s+-\S+)*\s+\S+(?:\s+-\S+)*\s+[^\s-]", doc="sed -n '1,80p' f"),
    Rule("awk-print", "view", r"^g?awk(?:\s+-[Fv]\s+\S+|\s+-\S+)*\s+\S+(?:\s+-\S+)*\s+[^\s-]",
         doc="awk 'NR>=10 && NR<=20' f"),
    Rule("jq-print", "view", r"^jq(?:\s+-\S+)*\s+\S+\s+[^\s-]", doc="jq .name package.json"),
    Rule("git-show-file", "view", r"^git\s+show\s+\S*:\S", doc="git show HEAD:path/to/f.py"),
    Rule("git-blame", "view", r"^git\s+blame(?:\s|$)", doc="git blame -L 10,30 f.py (prints the lines)"),
    # -- searches
    Rule("grep", "search", r"^(?:grep|egrep|fgrep|rg|ag|ack|ack-grep)(?:\s|$)", doc="grep -rn foo src/"),
    Rule("git-search", "search",
         r"^git\s+(?:grep|ls-files|ls-tree)(?:\s|$)|^git\s+log\s(?:.*\s)?(?:--grep|-[SG])",
         doc="git grep foo, git log --grep L031 (a search of the history's messages or, with -S/-G, its changes)"),
    Rule("list-or-find", "search", r"^(?:find|fd|fdfind|locate|ls|ll|tree|dir)(?:\s|$)", doc="find . -name x, ls -la"),
    Rule("swe-agent-search", "search", r"^(?:find_file|search_dir|search_file)(?:\s|$)", doc="search_dir foo"),
)
"""Shell rules in the order they are tried. An action no rule matches is ``other``."""


def rule_table() -> list[dict[str, str]]:
    """The shell rules as rows (name, class, pattern, strip, doc), for display and docs."""
    return [
        {"name": r.name, "class": r.klass, "pattern": r.pattern, "strip": r.strip or "", "doc": r.doc}
        for r in SHELL_RULES
    ]
