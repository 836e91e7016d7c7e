#!/usr/bin/env bash
# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in package.json)
# against `autoresearch-mcp serve --transport http` on a free loopback port with a throwaway database.
#
#   bash tests/conformance/run.sh                 # every applicable scenario; exit 1 if any check fails
#   SCENARIOS="ping logging-set-level" bash tests/conformance/run.sh
#
# Needs node and npm (the registry once: the suite is installed into .conformance/, which git ignores).
# Only the scenarios that apply to any server are run: the others call the reference test server's
# fixtures (test_* tools and prompts, test:// resources). tools-call-simple-text and tools-call-error are
# left out on purpose: they "pass" on any server, because "Unknown tool: test_simple_text" satisfies them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SUITE_DIR=${CONFORMANCE_DIR:-$ROOT/.conformance}
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
SCENARIOS=${SCENARIOS:-"server-initialize ping tools-list resources-list prompts-list logging-set-level
completion-complete resources-subscribe resources-unsubscribe server-sse-multiple-streams
dns-rebinding-protection"}

# Install the pinned suite unless that exact lockfile is already installed.
mkdir -p "$SUITE_DIR"
if ! cmp -s "$HERE/package-lock.json" "$SUITE_DIR/package-lock.json" ||
    [ ! -x "$SUITE_DIR/node_modules/.bin/conformance" ]; then
    cp "$HERE/package.json" "$HERE/package-lock.json" "$SUITE_DIR/"
    (cd "$SUITE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi

# The suite imports fs.globSync, which Node has only from 22 on. On older Node an ESM resolve hook
# serves `fs` with a small globSync added (node20-compat/; a no-op on Node >= 22, needs Node >= 20.6).
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 6) ? 0 : 1)'; then
    echo "the conformance suite needs Node >= 20.6 (this is $(node --version))" >&2
    exit 2
fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
    export NODE_OPTIONS="${NODE_OPTIONS:-} --import $HERE/node20-compat/register.mjs"
fi

TMP=$(mktemp -d)
# The server picks a free port itself (--port 0) and writes it to a file once it listens: a port found
# free here and handed over could be taken by another process first. PORT=N still fixes one.
AUTORESEARCH_DATA_DIR="$TMP/data" AUTORESEARCH_LOG_LEVEL=WARNING \
    "$PYTHON" -m autoresearch_mcp.cli serve --transport http --host 127.0.0.1 --port "${PORT:-0}" \
    --port-file "$TMP/port" --db "$TMP/conformance.db" --workers 1 >"$TMP/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$TMP"' EXIT
"$PYTHON" - "$TMP/port" "$SERVER" <<'EOF' || { cat "$TMP/server.log"; exit 1; }
import os, sys, time
port_file, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 60
while not os.path.exists(port_file):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("the server exited")
    if time.monotonic() > deadline:
        sys.exit("the server never listened")
    time.sleep(0.2)
EOF
PORT=$(cat "$TMP/port")
URL="http://127.0.0.1:$PORT/mcp"

failed=()
passed_checks=0
total_checks=0
for scenario in $SCENARIOS; do
    out="$TMP/results/$scenario"
    if log=$("$SUITE_DIR/node_modules/.bin/conformance" server --url "$URL" --scenario "$scenario" -o "$out" 2>&1); then
        verdict=PASS
    else
        verdict=FAIL
        failed+=("$scenario")
    fi
    counts=$(node -e '
        const fs = require("fs"), path = require("path");
        let ok = 0, all = 0;
        for (const d of fs.readdirSync(process.argv[1])) {
            for (const c of JSON.parse(fs.readFileSync(path.join(process.argv[1], d, "checks.json"))))
                if (c.status !== "INFO") { all++; if (c.status === "SUCCESS") ok++; }
        }
        console.log(ok + " " + all);' "$out" 2>/dev/null || echo "0 0")
    read -r ok all <<<"$counts"
    passed_checks=$((passed_checks + ok))
    total_checks=$((total_checks + all))
    echo "$verdict $scenario ($ok/$all checks)"
    if [ "$verdict" = FAIL ]; then
        printf '%s\n' "$log" | sed 's/\x1b\[[0-9;]*m//g' | grep -a -E 'FAILURE|WARNING|Error' | head -5 | sed 's/^/    /'
    fi
done
echo "$passed_checks/$total_checks checks passed in $(wc -w <<<"$SCENARIOS") scenarios"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}"
    echo "--- server log (tail)"
    tail -20 "$TMP/server.log"
    exit 1
fi
