#!/usr/bin/env bash
# Creates the Python environment the provider tests validate request bodies with:
# `.venv` at the repository root holding the official `openai` and `anthropic` SDKs
# and pydantic (tests/sdk/validate.py). Safe to run again: an existing, complete
# environment is left as it is; a broken or partial one is repaired.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"

if ! command -v "$python" >/dev/null 2>&1; then
    echo "setup-test-env: $python not found; install Python 3.9 or newer" >&2
    exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi

if "$venv/bin/python" -c 'import openai, anthropic, pydantic' >/dev/null 2>&1; then
    echo "setup-test-env: $venv is ready"
    exit 0
fi

"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check openai anthropic pydantic
"$venv/bin/python" -c 'import openai, anthropic, pydantic; print("setup-test-env: openai", openai.__version__, "anthropic", anthropic.__version__, "pydantic", pydantic.VERSION)'
