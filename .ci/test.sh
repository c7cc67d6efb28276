#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine: formatting, vet, race-enabled tests,
# a short fuzz pass over every fuzz target, and (when Node can be installed) the official
# MCP conformance suite through the router.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOFLAGS="${GOFLAGS:-} -mod=mod"
FUZZTIME="${FUZZTIME:-4s}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
failed=0
step() { printf '\n==> %s\n' "$*"; }

step "gofmt"
unformatted="$(find . -name '*.go' -not -path './.cache/*' -not -path '*/node_modules/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l)"
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "external tools for end-to-end tests"
bash .ci/deps.sh || echo "warning: some optional test dependencies could not be installed; the tests that need them will skip"

step "go test -race"
go test -race -count=1 -timeout 20m ./... 2>&1 | tee "$logs/test.log"

step "fuzz (${FUZZTIME} per target)"
for pkg in $(go list ./...); do
	targets="$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)"
	for t in $targets; do
		echo "fuzz $pkg $t"
		if ! go test -run='^$' -fuzz="^${t}\$" -fuzztime="$FUZZTIME" "$pkg" >"$logs/fuzz.log" 2>&1; then
			# The fuzzer sometimes reports its own time limit as "context deadline
			# exceeded" without any failing input: not a finding. A real finding always
			# writes its input under testdata/fuzz.
			if grep -q "context deadline exceeded" "$logs/fuzz.log" && ! grep -q "Failing input written" "$logs/fuzz.log"; then
				echo "  (fuzzer stopped at its time limit without a finding)"
			else
				cat "$logs/fuzz.log"; failed=1
			fi
		fi
	done
done

if [ -d bench/peers ]; then
	step "bench/peers module"
	(cd bench/peers && go vet ./... && go test -count=1 ./...)
fi

if [ "$failed" != 0 ]; then echo "FAILED"; exit 1; fi
echo "all checks passed"
