#!/usr/bin/env bash
# Installs what the tests need, project-local and pinned:
# 1. the Python environment the provider tests validate request bodies with:
#    `.venv` at the repository root holding the official `openai` and `anthropic` SDKs
#    and pydantic (tests/sdk/validate.py), and `opentelemetry-proto` (pinned), the OTLP
#    protobuf definitions the OTLP/HTTP receiver of the trace export tests parses with
#    (tests/fixtures/otlp_receiver.py);
# 2. Debian's `chromium`, which renders the HTML report in the report tests
#    (tests/it/report.rs), installed with apt-get when it is missing and we are root
#    (CI); otherwise named as missing (the tests fail, or skip with
#    IO_HARNESS_SKIP_CHROMIUM=1);
# 3. the reference MCP servers the MCP client tests run against (tests/it/mcp.rs):
#    `@modelcontextprotocol/server-everything` and `server-filesystem` from npm, into
#    `.mcp-servers/` (git-ignored). Needs node and npm.
# 4. aimock from npm, a mock of the providers' APIs with chaos modes, into `.aimock/`.
# Safe to run again: what is complete is left as it is; a broken or partial install is
# repaired.
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

otel_proto="1.45.2"
if "$venv/bin/python" -c 'import openai, anthropic, pydantic, pytest' >/dev/null 2>&1 \
    && [ "$("$venv/bin/python" -m pip show opentelemetry-proto 2>/dev/null | sed -n 's/^Version: //p')" = "$otel_proto" ]; then
    echo "setup-test-env: $venv is ready"
else
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check openai anthropic pydantic pytest \
        "opentelemetry-proto==$otel_proto"
    "$venv/bin/python" -c 'import openai, anthropic, pydantic, pytest; from opentelemetry.proto.collector.trace.v1 import trace_service_pb2; print("setup-test-env: openai", openai.__version__, "anthropic", anthropic.__version__, "pydantic", pydantic.VERSION)'
fi

# Reference MCP servers, pinned. Bump both versions together and rerun.
mcp_dir="$root/.mcp-servers"
mcp_everything="2026.8.31"
mcp_filesystem="2026.8.31"
mcp_stamp="$mcp_dir/.installed-$mcp_everything-$mcp_filesystem"
if [ -f "$mcp_stamp" ] \
    && [ -f "$mcp_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ] \
    && [ -f "$mcp_dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ]; then
    echo "setup-test-env: $mcp_dir is ready"
else
    for tool in node npm; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "setup-test-env: $tool not found; the MCP tests need Node.js 18 or newer with npm" >&2
            exit 1
        fi
    done
    rm -rf "$mcp_dir"
    mkdir -p "$mcp_dir"
    cat >"$mcp_dir/package.json" <<'JSON'
{ "name": "io-harness-mcp-test-servers", "private": true }
JSON
    npm install --prefix "$mcp_dir" --no-audit --no-fund --ignore-scripts --save-exact --loglevel=error \
        "@modelcontextprotocol/server-everything@$mcp_everything" \
        "@modelcontextprotocol/server-filesystem@$mcp_filesystem"
    touch "$mcp_stamp"
    echo "setup-test-env: MCP servers everything $mcp_everything, filesystem $mcp_filesystem in $mcp_dir"
fi

# aimock, a mock of the providers' APIs with chaos modes (tests/it/providers/aimock.rs),
# pinned, into `.aimock/` (git-ignored). It has no dependencies of its own.
aimock_dir="$root/.aimock"
aimock_version="1.43.0"
aimock_stamp="$aimock_dir/.installed-$aimock_version"
if [ -f "$aimock_stamp" ] && [ -f "$aimock_dir/node_modules/@copilotkit/aimock/dist/cli.js" ]; then
    echo "setup-test-env: $aimock_dir is ready"
else
    rm -rf "$aimock_dir"
    mkdir -p "$aimock_dir"
    cat >"$aimock_dir/package.json" <<'JSON'
{ "name": "io-harness-aimock", "private": true }
JSON
    npm install --prefix "$aimock_dir" --no-audit --no-fund --ignore-scripts --save-exact --loglevel=error \
        "@copilotkit/aimock@$aimock_version"
    touch "$aimock_stamp"
    echo "setup-test-env: aimock $aimock_version in $aimock_dir"
fi

# Chromium for the report tests: only if missing, only as root (CI runs as root here).
if command -v chromium >/dev/null 2>&1; then
    echo "setup-test-env: chromium is ready"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null
    echo "setup-test-env: installed $(chromium --version 2>/dev/null | head -1)"
else
    echo "setup-test-env: chromium not found and not root: install Debian's chromium for the report tests (or set IO_HARNESS_SKIP_CHROMIUM=1)" >&2
fi
