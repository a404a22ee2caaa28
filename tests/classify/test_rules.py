"""Table-driven tests for every classification rule, with the tricky cases.

Each case is (command, expected primary class, expected action classes). Both the vectorised
classifier and the per-row reference must give the expected answer.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from trajlens.classify import SHELL_RULES, classify_calls, classify_command_slow
from trajlens.classify.calls import deciding_actions
from trajlens.classify.reference import explain_command, shell_action_classes
from trajlens.classify.rules import BEHAVIOUR_CLASSES, PRIORITY, REDIRECT_RULE, rule_table

SHELL_CASES: list[tuple[str, str, list[str]]] = [
    # -- submit
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", "submit",
     ["submit", "other", "other"]),
    ("echo MINI_SWE_AGENT_FINAL_OUTPUT", "submit", ["submit"]),
    ("echo 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT'", "submit", ["submit"]),
    ("submit", "submit", ["submit"]),
    ("submit 'flag{x|y}'", "submit", ["submit"]),
    # -- test suite: the runner alone, or over directories
    ("pytest", "test_suite", ["test_suite"]),
    ("pytest -x -q", "test_suite", ["test_suite"]),
    ("python -m pytest tests/", "test_suite", ["test_suite"]),
    ("python3 -m pytest tests/ sympy/core/tests", "test_suite", ["test_suite"]),
    ("cd /testbed && python -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning 2>&1 | tail -30",
     "test_suite", ["test_suite"]),
    ("/opt/conda/envs/testbed/bin/python -m pytest --tb=short", "test_suite", ["test_suite"]),
    ("py.test -q", "test_suite", ["test_suite"]),
    ("tox", "test_suite", ["test_suite"]),
    ("tox -e py39", "test_suite", ["test_suite"]),
    ("nox -s tests", "test_suite", ["test_suite"]),
    ("python -m unittest discover", "test_suite", ["test_suite"]),
    ("python -m unittest discover -s tests -p 'test_*.py'", "test_suite", ["test_suite"]),
    ("python -m unittest", "test_suite", ["test_suite"]),
    ("./runtests.py", "test_suite", ["test_suite"]),
    ("./tests/runtests.py --parallel 1", "test_suite", ["test_suite"]),
    ("python tests/runtests.py --settings=test_sqlite --verbosity 2", "test_suite", ["test_suite"]),
    ("bin/test", "test_suite", ["test_suite"]),
    ("bin/test sympy/core", "test_suite", ["test_suite"]),
    ("python manage.py test", "test_suite", ["test_suite"]),
    ("python setup.py test", "test_suite", ["test_suite"]),
    ("coverage run -m pytest", "test_suite", ["test_suite"]),
    ("python -m coverage run -m pytest tests/test_a.py", "test_targeted", ["test_targeted"]),
    ("python3 -m coverage run --branch -m pytest", "test_suite", ["test_suite"]),
    # -- collecting tests runs none
    ("pytest --co -q", "other", ["other"]),
    ("cd /testbed && python -m pytest --collect-only tests/test_x.py 2>&1 | head -40", "other", ["other"]),
    # help lists options and runs no test, as --version does
    ("pytest -h", "other", ["other"]),
    ("python -m pytest -h | grep -- --co", "other", ["other"]),
    # a doctest file, or discover narrowed to one file without wildcards, is targeted
    ("pytest README.rst", "test_targeted", ["test_targeted"]),
    ("python -m pytest doc/en/example.rst -q", "test_targeted", ["test_targeted"]),
    ('python -m unittest discover -s tests -p "test_json.py"', "test_targeted", ["test_targeted"]),
    ('python -m unittest discover -s tests -p "test*.py"', "test_suite", ["test_suite"]),
    # git's dry runs and its index alone change no file; the same commands that do are edits
    ("git apply --check fix.patch && git apply fix.patch", "edit", ["other", "edit"]),
    ("git apply --stat fix.patch", "other", ["other"]),
    ("git apply --stat --apply fix.patch", "edit", ["edit"]),
    ("git restore -q src/x.py", "edit", ["edit"]),
    ("git restore --quiet --staged src/x.py", "other", ["other"]),
    ("git clean -n", "other", ["other"]),
    ("git clean -fdn", "other", ["other"]),
    ("git clean --dry-run -d", "other", ["other"]),
    ("git clean -fd", "edit", ["edit"]),
    ("git rm --cached src/x.py", "other", ["other"]),
    ("git restore --staged src/x.py", "other", ["other"]),
    ("git restore --staged --worktree src/x.py", "edit", ["edit"]),
    # a wrapper's or a shell's option that takes a value is unwrapped with it
    ("sudo -u app python reproduce.py", "run_script", ["run_script"]),
    ("sudo -Eu app python reproduce.py", "run_script", ["run_script"]),
    ("sudo --user app python reproduce.py", "run_script", ["run_script"]),
    ("sudo -h python reproduce.py", "run_script", ["run_script"]),
    # a file given as an option's value is no test file
    ("pytest tests/ --log-file log.txt --report-log report.txt", "test_suite", ["test_suite"]),
    ("pytest --doctest-glob *.rst docs/", "test_suite", ["test_suite"]),
    ('bash -o pipefail -c "pytest tests/test_x.py | tail"', "test_targeted", ["test_targeted"]),
    ("bash -euo pipefail -c 'python -m pytest tests/test_x.py'", "test_targeted", ["test_targeted"]),
    ('bash --login -c "python reproduce.py"', "run_script", ["run_script"]),
    ("bash -O extglob -c 'ls tests'", "search", ["search"]),
    ("pytest -q --fixtures", "other", ["other"]),
    ("pytest --cov=pkg tests/", "test_suite", ["test_suite"]),
    ("timeout 600 pytest -x", "test_suite", ["test_suite"]),
    ("PYTHONPATH=. DJANGO_SETTINGS_MODULE=x pytest", "test_suite", ["test_suite"]),
    ("source .venv/bin/activate && pytest", "test_suite", ["test_suite"]),
    ("npm test", "test_suite", ["test_suite"]),
    ("go test ./...", "test_suite", ["test_suite"]),
    ("make test", "test_suite", ["test_suite"]),
    ("nosetests", "test_suite", ["test_suite"]),
    # -- targeted test runs: files, node ids, modules, labels, -k / -m
    ("pytest tests/test_x.py", "test_targeted", ["test_targeted"]),
    ("pytest a.py::test_b", "test_targeted", ["test_targeted"]),
    ("pytest 'tests/test_x.py::TestA::test_b[param-1]' -xvs", "test_targeted", ["test_targeted"]),
    ("pytest -k foo", "test_targeted", ["test_targeted"]),
    ("python -m pytest -m 'not slow' tests/", "test_targeted", ["test_targeted"]),
    ("python -m pytest tests/ -k \"dict and not slow\" 2>&1 | head -100", "test_targeted", ["test_targeted"]),
    ("cd /testbed && python -m pytest pvlib/tests/test_irradiance.py::test_reindl -xvs 2>&1 | tail -50",
     "test_targeted", ["test_targeted"]),
    ("/usr/bin/python3 -m pytest tests/test_utils.py", "test_targeted", ["test_targeted"]),
    ("python tests/runtests.py model_fields", "test_targeted", ["test_targeted"]),
    ("./tests/runtests.py admin_docs.test_utils", "test_targeted", ["test_targeted"]),
    ("cd tests && ./runtests.py --settings=test_sqlite --parallel 1 queries.test_qs_combinators",
     "test_targeted", ["test_targeted"]),
    ("./tests/runtests.py --verbosity 2 -k test_trim", "test_targeted", ["test_targeted"]),
    ("bin/test sympy/core/tests/test_x.py", "test_targeted", ["test_targeted"]),
    ("./bin/test test_basic", "test_targeted", ["test_targeted"]),
    ("python bin/test sympy/printing/tests/test_latex.py -k test_latex_basic", "test_targeted", ["test_targeted"]),
    ("python -m unittest tests.test_x", "test_targeted", ["test_targeted"]),
    ("python -m unittest -v tests.test_x.TestY.test_z", "test_targeted", ["test_targeted"]),
    ("python manage.py test app.tests", "test_targeted", ["test_targeted"]),
    ("python tests/test_models.py", "test_targeted", ["test_targeted"]),
    ("python -m pydicom.tests.test_json", "test_targeted", ["test_targeted"]),
    ("python tests/unittest_inference.py", "test_targeted", ["test_targeted"]),
    ("python3 -m tests.unittest_brain", "test_targeted", ["test_targeted"]),
    ("python tests/unittest_helpers/make_data.py", "run_script", ["run_script"]),
    ("tox -e py39 -- tests/test_x.py", "test_targeted", ["test_targeted"]),
    ("tox -e py38 -- -k test_thing", "test_targeted", ["test_targeted"]),
    ("python -m doctest -v README.rst", "test_targeted", ["test_targeted"]),
    ("nosetests tests/test_x.py", "test_targeted", ["test_targeted"]),
    ("go test -run TestX ./pkg", "test_targeted", ["test_targeted"]),
    ("python -m unittest -v -k test_trim", "test_targeted", ["test_targeted"]),
    ("cargo test parser::tests", "test_targeted", ["test_targeted"]),
    ("npx jest src/app.test.js", "test_targeted", ["test_targeted"]),
    ("npm test -- src/app.test.ts", "test_targeted", ["test_targeted"]),
    # -- a version or help query runs nothing
    ("pytest --version", "other", ["other"]),
    ("python3 --version", "other", ["other"]),
    ("python -m django --version", "other", ["other"]),
    ("sqlfluff parse --help | head -30", "other", ["other"]),
    # -- quick checks: inline interpreter code
    ("python -c \"print('a; b && c')\"", "quick_check", ["quick_check"]),
    ("python3 -c 'import sys; print(sys.path)' 2>&1 | head -5", "quick_check", ["quick_check"]),
    ("python - <<EOF\nimport x\nprint(x)\nEOF", "quick_check", ["quick_check"]),
    ("python3 <<'EOF'\nimport sys\n# a comment with it's apostrophe\nprint(1)\nEOF", "quick_check", ["quick_check"]),
    ("cat <<'EOF' | python3\nprint(1)\nEOF", "quick_check", ["other", "quick_check"]),
    ("echo 'print(1)' | python", "quick_check", ["other", "quick_check"]),
    ("python3 <<< 'print(1)'", "quick_check", ["quick_check"]),
    ("cd /testbed && python -c \"\nimport sympy\nprint(sympy.__version__)\n\"", "quick_check", ["quick_check"]),
    ("node -e 'console.log(1)'", "quick_check", ["quick_check"]),
    ("bash <<'EOF'\ncd /x\nEOF", "quick_check", ["quick_check"]),
    ("curl -s https://example.org/install.sh | sh", "quick_check", ["other", "quick_check"]),
    ("echo 0110 | perl -lpe '$_=pack \"B*\",$_'", "quick_check", ["other", "quick_check"]),
    # -- scripts
    ("python reproduce.py", "run_script", ["run_script"]),
    ("python3 -u -W ignore /tmp/reproduce.py --flag", "run_script", ["run_script"]),
    ("bash run.sh", "run_script", ["run_script"]),
    ("node index.js", "run_script", ["run_script"]),
    ("./run.sh", "run_script", ["run_script"]),
    ("chmod +x x.sh && ./x.sh", "run_script", ["other", "run_script"]),
    ("python tests/missing_colon.py", "run_script", ["run_script"]),
    ("python test_fix.py", "run_script", ["run_script"]),
    ("python -m pylint --rcfile=x reproduce.py", "run_script", ["run_script"]),
    ("sqlfluff lint test_l060.sql --rules L060", "run_script", ["run_script"]),
    ("cd /tmp/proj && sphinx-build -b html . _build 2>&1 | tail", "run_script", ["run_script"]),
    ("python reproduce.py > out.txt 2>&1", "run_script", ["run_script"]),
    ("pip install -q numpy && python reproduce.py", "run_script", ["other", "run_script"]),
    ("python3 - arg <<EOF\nx\nEOF", "quick_check", ["quick_check"]),
    ("python reproduce.py <<EOF\ny\nEOF", "run_script", ["run_script"]),
    # -- heredocs that write files vs heredocs that run
    ("cat > f.py <<EOF\nimport os\nprint(os.getcwd())\nEOF", "edit", ["edit"]),
    ("cat <<'EOF' > reproduce.py\nprint('x && y; z | w')\nEOF", "edit", ["edit"]),
    ("cat >> f.txt << 'END'\nline\nEND", "edit", ["edit"]),
    ("cat <<-EOF > f.sh\n\techo hi\n\tEOF", "edit", ["edit"]),
    ("cat <<'EOF' > check.py\nprint(1)\nEOF\npython3 check.py", "run_script", ["edit", "run_script"]),
    ("cd /testbed && cat > t.py << 'EOF'\nimport a\nEOF\n\npython t.py 2>&1 | tail -5", "run_script",
     ["edit", "run_script"]),
    ("cat > a.py <<EOF\nx = 1\nEOF\ncat > b.py <<EOF\ny = 2\nEOF\npython b.py", "run_script",
     ["edit", "edit", "run_script"]),
    ("cat > f.py <<EOF\nprint('truncated log, no terminator')", "edit", ["edit"]),
    ("tee f.py <<EOF\nx\nEOF", "edit", ["edit"]),
    ("cat <<EOF\nhello\nEOF", "other", ["other"]),
    # the earliest operator starts the heredoc, also where it starts the command and a later one follows
    ("<<'PY'\nimport os\nPY cd /testbed <<'PY'\nimport os\nPY \n ls", "search", ["other", "search"]),
    # the earliest terminating line ends a heredoc, an empty one too
    ("cat > empty.py <<'EOF'\nEOF\npython empty.py\nEOF", "run_script", ["edit", "run_script", "other"]),
    ("cat > f.py <<EOF\n EOF\nsubmit\nEOF", "submit", ["edit", "submit", "other"]),
    # -- edits
    ("sed -i 's/a/b/' f.py", "edit", ["edit"]),
    ("sed -i.bak -e 's/a/b/' f.py", "edit", ["edit"]),
    ("echo x >> f", "edit", ["edit"]),
    ("echo \"a > b\" > notes.txt", "edit", ["edit"]),
    ("printf '%s\\n' a b > list.txt", "edit", ["edit"]),
    ("python -c 'print(1)' | tee out.txt", "quick_check", ["quick_check", "edit"]),
    ("patch -p1 < fix.patch", "edit", ["edit"]),
    ("git apply fix.diff", "edit", ["edit"]),
    ("git checkout -- src/x.py", "edit", ["edit"]),
    ("git checkout pyproject.toml", "edit", ["edit"]),
    ("git stash", "edit", ["edit"]),
    ("mv a.py b.py", "edit", ["edit"]),
    ("cp a.py a.py.bak", "edit", ["edit"]),
    ("rm -rf build/", "edit", ["edit"]),
    ("touch new.py", "edit", ["edit"]),
    ("find . -name '*.pyc' -delete", "edit", ["edit"]),
    ("perl -pi -e 's/a/b/' f.py", "edit", ["edit"]),
    ("awk -i inplace '{print}' f.txt", "edit", ["edit"]),
    ("git diff > patch.txt", "edit", ["edit"]),
    ("grep -n x f.py | tail -1 | cut -d: -f2 > token.txt", "edit", ["search", "edit"]),
    ("create reproduce.py", "edit", ["edit"]),
    ("edit 10:12\n    return x; y && z\nend_of_edit", "edit", ["edit"]),
    ("str_replace_editor create /testbed/x.py --file_text 'a'", "edit", ["edit"]),
    ("# First, back up\ncp x.py x.py.bak", "edit", ["edit"]),
    ("unzip data.zip", "edit", ["edit"]),
    ("unzip -o -d /tmp/x data.zip", "edit", ["edit"]),
    ("unzip -l data.zip", "other", ["other"]),
    ("unzip -ql data.zip", "other", ["other"]),
    ("tar -xzf a.tgz -C /tmp", "edit", ["edit"]),
    ("tar xf a.tar", "edit", ["edit"]),
    ("tar --extract -f a.tar", "edit", ["edit"]),
    ("tar -tzf a.tgz", "other", ["other"]),
    ("tar -czf out.tgz src --exclude x", "other", ["other"]),
    ("gunzip data.gz", "edit", ["edit"]),
    # -- formatters rewrite files, unless they only report
    ("black .", "edit", ["edit"]),
    ("cd /repo && python3 -m black src/x.py && pytest -q", "test_suite", ["edit", "test_suite"]),
    ("isort x.py", "edit", ["edit"]),
    ("ruff format src", "edit", ["edit"]),
    ("ruff check --fix x.py", "edit", ["edit"]),
    ("ruff --fix x.py", "edit", ["edit"]),
    ("autopep8 --in-place --aggressive x.py", "edit", ["edit"]),
    ("yapf -i x.py", "edit", ["edit"]),
    ("npx prettier --write src", "edit", ["edit"]),
    ("gofmt -w main.go", "edit", ["edit"]),
    ("clang-format -i a.c", "edit", ["edit"]),
    ("cargo fmt", "edit", ["edit"]),
    ("black --check .", "other", ["other"]),
    ("ruff format --diff x.py", "other", ["other"]),
    ("ruff check --fix --diff x.py", "other", ["other"]),
    ("isort --check-only --diff x.py", "other", ["other"]),
    ("cargo fmt -- --check", "other", ["other"]),
    ("ruff check .", "other", ["other"]),
    ("autopep8 x.py", "other", ["other"]),
    ("gofmt -l .", "other", ["other"]),
    ("black --version", "other", ["other"]),
    # -- views
    ("cat f.py", "view", ["view"]),
    ("cat -n f.py | head -50", "view", ["view"]),
    ("head -n 20 f.py", "view", ["view"]),
    ("tail -f log.txt", "view", ["view"]),
    ("sed -n '1,80p' f.py", "view", ["view"]),
    ("sed -n 10,20p f.py", "view", ["view"]),
    ("nl -ba f.py | sed -n '100,140p'", "view", ["view"]),
    ("cat f.py | grep -n 'def x'", "view", ["view"]),
    ("awk 'NR>=10 && NR<=20' f.py", "view", ["view"]),
    ("jq .name package.json", "view", ["view"]),
    ("open src/x.py 120", "view", ["view"]),
    ("goto 200", "view", ["view"]),
    ("scroll_down", "view", ["view"]),
    ("str_replace_editor view /testbed/x.py --view_range 1 40", "view", ["view"]),
    ("pdftotext report.pdf -", "view", ["view"]),
    ("git show HEAD:src/x.py", "view", ["view"]),
    ("sed -i 's/a/b/' f.py && sed -n '1,5p' f.py", "edit", ["edit", "view"]),
    # -- searches
    ("grep -rn 'def foo' src/", "search", ["search"]),
    ("grep -rn foo . | head -20", "search", ["search"]),
    ("rg -n foo", "search", ["search"]),
    ("git grep -n foo", "search", ["search"]),
    ("git log --oneline --grep L031", "search", ["search"]),
    ("git log -S'def foo' --oneline -- src/x.py", "search", ["search"]),
    ("git log --oneline -5 --since=2.weeks", "other", ["other"]),
    ("find . -name '*.py' | xargs grep -l foo", "search", ["search", "search"]),
    ("find . -name '*.py' -exec grep -l foo {} \\; | grep -v test", "search", ["search"]),
    ("ls -la", "search", ["search"]),
    ("ls tests/ | grep test_", "search", ["search"]),
    ("tree -L 2", "search", ["search"]),
    ("find_file fields.py src", "search", ["search"]),
    ("search_dir 'def foo'", "search", ["search"]),
    # -- other
    ("pip install -e .", "other", ["other"]),
    ("python -m pip install numpy", "other", ["other"]),
    ("git status", "other", ["other"]),
    ("git diff", "other", ["other"]),
    ("git log --oneline | head -5", "other", ["other"]),
    ("echo hi", "other", ["other"]),
    ("mkdir -p /tmp/x", "other", ["other"]),
    ("which latex || echo 'latex not found'", "other", ["other", "other"]),
    ("python3 -m http.server 8000", "other", ["other"]),
    ("python setup.py build_ext --inplace", "other", ["other"]),
    ("apt-get update && apt-get install -y cron", "other", ["other", "other"]),
    ("curl -X POST -d 'a=1;b=2' http://x/y", "other", ["other"]),
    # -- no action at all
    ("cd /testbed", "other", []),
    ("export X=1 && cd src", "other", []),
    ("", "other", []),
    ("# only a comment", "other", []),
    # -- chains, pipes and wrappers
    ("cd /testbed && ls && cat setup.py", "view", ["search", "view"]),
    ("cd /x; pytest tests/test_a.py || echo failed", "test_targeted", ["test_targeted", "other"]),
    ("python x.py & sleep 2; cat out.log", "run_script", ["run_script", "other", "view"]),
    ("(cd /testbed && python -m pytest tests/test_x.py)", "test_targeted", ["test_targeted"]),
    ("(cd /testbed && pytest -q tests/test_a.py) 2>&1 | tail -5", "test_targeted", ["test_targeted"]),
    ("if [ -f x.py ]; then python x.py; fi", "run_script", ["run_script"]),
    ("for f in a.py b.py; do cat $f; done", "view", ["view"]),
    ("bash -lc 'cd /testbed && pytest tests/test_x.py -q'", "test_targeted", ["test_targeted"]),
    ("bash -c \"python -c 'print(1)'\"", "quick_check", ["quick_check"]),
    ("sh -c 'grep -rn foo . | head'", "search", ["search"]),
    ("timeout 30 bash -lc 'python reproduce.py'", "run_script", ["run_script"]),
    ("cd /testbed && \\\n  python -m pytest \\\n  tests/test_x.py", "test_targeted", ["test_targeted"]),
    ("echo $(ls) && cat `which python`", "view", ["other", "view"]),
    ("xargs -I {} cat {} < files.txt", "view", ["view"]),
    # -- forms found by the constructed set (tests/data/constructed_commands.jsonl)
    ("python -m pytest --pyargs pkg.tests.test_io -q", "test_targeted", ["test_targeted"]),
    ("pytest --pyargs pkg", "test_suite", ["test_suite"]),
    ("for f in tests/test_a.py tests/test_b.py; do python -m pytest $f -q; done", "test_targeted", ["test_targeted"]),
    ("timeout -k 10 300 python -m pytest tests/test_x.py -q", "test_targeted", ["test_targeted"]),
    ("timeout -s KILL 60 pytest", "test_suite", ["test_suite"]),
    ("python -m tox -e py310", "test_suite", ["test_suite"]),
    ("python -m tox -e py310 -- tests/test_x.py", "test_targeted", ["test_targeted"]),
    ("bash run_tests.sh", "test_suite", ["test_suite"]),
    ("./run_tests.sh tests/test_x.py", "test_targeted", ["test_targeted"]),
    ("ed -s src/x.py <<< $'/def foo/\\na\\n    pass\\n.\\nw\\nq'", "edit", ["edit"]),
    ("ex -sc '%s/foo/bar/g|x' src/x.py", "edit", ["edit"]),
    ("apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/x.py\n*** End Patch\nEOF", "edit", ["edit"]),
    ("find src -name '*.py' -exec sed -i 's/a/b/g' {} +", "edit", ["edit"]),
    ("find src -name '*.py' -exec grep -l foo {} \\;", "search", ["search"]),
    ("git blame -L 10,30 src/x.py", "view", ["view"]),
]

TOOL_CASES: list[tuple[str, dict, str | None, str]] = [
    ("think", {"thought": "hmm"}, None, "think"),
    ("ThinkAction", {"thought": "hmm"}, None, "think"),
    ("finish", {"message": "done"}, None, "submit"),
    ("submit", {}, None, "submit"),
    ("str_replace_editor", {"command": "view", "path": "/w/x.py"}, None, "view"),
    ("str_replace_editor", {"command": "view", "path": "/w"}, None, "view"),
    ("str_replace_editor", {"command": "create", "path": "/w/x.py", "file_text": "x"}, None, "edit"),
    ("str_replace_editor", {"command": "str_replace", "path": "/w/x.py", "old_str": "a", "new_str": "b"}, None, "edit"),
    ("file_editor", {"command": "insert", "path": "/w/x.py", "insert_line": 3, "new_str": "b"}, None, "edit"),
    ("str_replace_editor", {"command": "undo_edit", "path": "/w/x.py"}, None, "edit"),
    ("str_replace_editor", {"command": "frobnicate", "path": "/w/x.py"}, None, "other"),
    ("str_replace_editor", {"action": "str_replace_editor view /w/x.py"}, "str_replace_editor view /w/x.py", "view"),
    ("open", {"action": "open x.py"}, "open x.py", "view"),
    ("edit", {"action": "edit 1:2\nx\nend_of_edit"}, "edit 1:2\nx\nend_of_edit", "edit"),
    ("find_file", {"file_name": "x.py"}, None, "search"),
    ("execute_bash", {"command": "pytest -k a"}, None, "test_targeted"),
    ("bash", {"command": "ls"}, None, "search"),
    ("terminal", {"command": "cat x.py"}, "cat x.py", "view"),
    ("execute_ipython_cell", {"code": "print(1)"}, None, "quick_check"),
    ("browser_click", {"index": 3}, None, "other"),
    ("chat_npc", {}, None, "other"),
    ("task_tracker", {"command": "plan", "task_list": []}, None, "think"),
    ("TodoWrite", {"todos": []}, None, "think"),
    ("apply_patch", {"input": "*** Begin Patch\n*** End Patch"}, None, "edit"),
    ("shell", {"command": ["bash", "-lc", "cd /repo && pytest -q"]}, None, "test_suite"),
    ("shell", {"command": ["rg", "-n", "def parse", "src"]}, None, "search"),
]


def _frame(rows: list[tuple[str, str, str | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"tool_name": [r[0] for r in rows], "arguments": [r[1] for r in rows], "command": [r[2] for r in rows]},
        schema={"tool_name": pl.String, "arguments": pl.String, "command": pl.String},
    )


@pytest.fixture(scope="module")
def shell_results() -> pl.DataFrame:
    rows = [("bash", json.dumps({"command": c}), c) for c, _, _ in SHELL_CASES]
    return classify_calls(_frame(rows))


@pytest.mark.parametrize("index", range(len(SHELL_CASES)), ids=[c[0][:60] for c in SHELL_CASES])
def test_shell_case(index, shell_results):
    command, primary, actions = SHELL_CASES[index]
    row = shell_results.row(index, named=True)
    assert (row["primary_class"], row["action_classes"]) == (primary, actions), explain_command(command)
    assert classify_command_slow("bash", json.dumps({"command": command}), command) == primary
    assert shell_action_classes(command) == actions


def test_the_deciding_action_is_the_references_first_action_of_the_primary_class():
    """The action the report's top commands name: the first of the command's actions with the
    call's class, normalised as the per-row reference normalises it, with the rule that decided."""
    commands = [c for c, _, _ in SHELL_CASES]
    classes = [primary for _, primary, _ in SHELL_CASES]
    found = deciding_actions(pl.Series(commands), pl.Series(classes))
    expected = [next((a for a in explain_command(c) if a.klass == primary), None) for c, primary in zip(commands, classes)]
    assert found["action"].to_list() == [None if a is None else a.normalised for a in expected]
    # the reference says "rule NAME" or "...; output redirect"; the vectorised rule is NAME or redirect-to-file
    redirected = [a is not None and "redirect" in a.reason for a in expected]
    assert (found["rule"] == REDIRECT_RULE).fill_null(False).to_list() == redirected
    assert sum(text is not None for text in found["action"]) > 150 and any(redirected)
    decided = deciding_actions(pl.Series(["cd /repo && timeout 60 python3 -m pytest tests/a.py -x 2>&1 | tail -5"]),
                               pl.Series(["test_targeted"]))
    assert decided.row(0) == ("python -m pytest tests/a.py -x", "pytest-files")
    assert deciding_actions(pl.Series(["ls", None]), pl.Series(["think", "view"])).rows() == [(None, None), (None, None)]


@pytest.mark.parametrize("tool, arguments, command, expected", TOOL_CASES, ids=[f"{c[0]}-{c[3]}" for c in TOOL_CASES])
def test_tool_case(tool, arguments, command, expected):
    frame = _frame([(tool, json.dumps(arguments), command)])
    assert classify_calls(frame)["primary_class"][0] == expected
    assert classify_command_slow(tool, json.dumps(arguments), command) == expected


def test_every_shell_rule_has_a_case():
    """Each rule decides at least one table case, so no rule is untested or shadowed."""
    decided = {e.reason.split(";")[0].removeprefix("rule ") for c, _, _ in SHELL_CASES for e in explain_command(c)}
    untested = [rule.name for rule in SHELL_RULES if rule.name not in decided]
    assert untested == []


def test_rules_are_well_formed():
    names = [r.name for r in SHELL_RULES]
    assert len(names) == len(set(names))
    assert all(r.klass in BEHAVIOUR_CLASSES for r in SHELL_RULES)
    # The engine relies on anchored patterns (first rule at the start wins).
    assert all(r.pattern.startswith("^") for r in SHELL_RULES)
    assert all(row["doc"] for row in rule_table())
    assert list(PRIORITY) == list(BEHAVIOUR_CLASSES)
