#!/usr/bin/env bash
# Installs trajlens and what it needs into the active virtual environment, or into .venv.
# A torch that is already installed is kept; where there is none, the CPU build is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${VIRTUAL_ENV:-}" ]; then
  PY="$VIRTUAL_ENV/bin/python"
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  PY=.venv/bin/python
fi

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "trajlens: installing the CPU build of torch" >&2
  "$PY" -m pip install --quiet --timeout 15 --retries 1 \
      --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    || "$PY" -m pip install --quiet torch==2.13.0
fi

stamp=.venv/.trajlens-installed
if [ -n "${VIRTUAL_ENV:-}" ] || [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$PY" -m pip install --quiet -e ".[test]"
  [ -n "${VIRTUAL_ENV:-}" ] || touch "$stamp"
fi
echo "$PY"
