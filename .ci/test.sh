#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine: formatting, vet, race-enabled tests,
# then without the race detector every test that skips or checks less under it (the
# allocation guards), a short fuzz pass over every fuzz target, and (when Node can be
# installed) the official MCP conformance suite through the router.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOFLAGS="${GOFLAGS:-} -mod=mod"
FUZZTIME="${FUZZTIME:-4s}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
failed=0
failures=() # what failed, with its failing rows, repeated at the end so the log's tail says why
step() { printf '\n==> %s\n' "$*"; }
# fail NAME [LOG]: marks the run failed; the summary at the end names NAME and repeats the
# table rows of LOG that failed (the reliability benchmarks print a PASS/FAIL table), or
# LOG's last lines when it has no such row.
fail() {
	failed=1
	local rows=""
	if [ -n "${2:-}" ] && [ -f "$2" ]; then
		rows="$(grep -E '\| *FAIL *\|' "$2" | cut -c1-400 || true)"
		[ -n "$rows" ] || rows="$(tail -n 5 "$2" | cut -c1-400)" # no table: how it ended
	fi
	failures+=("$1${rows:+$'\n'$rows}")
}

step "gofmt"
unformatted="$(find . -name '*.go' -not -path './.cache/*' -not -path '*/node_modules/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l)"
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

# testjson reads `go test -json` for the two test steps below. It lives in .ci, which
# ./... does not reach, so it is vetted and tested here.
step "test tools (.ci/testjson)"
go vet ./.ci/testjson
go test -count=1 ./.ci/testjson
go build -o "$logs/testjson" ./.ci/testjson

step "external tools for end-to-end tests"
bash .ci/deps.sh || echo "warning: some optional test dependencies could not be installed; the tests that need them will skip"

# Output as plain `go test` gives it, plus one line per skipped test with its reason; the
# tests that skipped because of the race detector are listed for the next step.
step "go test -race"
go test -race -count=1 -timeout 20m -json ./... 2>&1 | "$logs/testjson" filter -skips "$logs/race-skips.txt" | tee "$logs/test.log"

# The race runtime allocates on its own, so the allocation guards skip (or check less)
# under -race. Here they run without it: every test that skipped above for the race
# detector, and every test that reads raceEnabled (directly or through a helper). One
# that still skips for the race detector fails the step.
step "tests that skip or check less under the race detector, run without it"
{ cat "$logs/race-skips.txt"; go list -f '{{.ImportPath}} {{.Dir}}' ./... | "$logs/testjson" racetests; } | sort -u >"$logs/norace.txt"
if [ -s "$logs/norace.txt" ]; then
	names="$(cut -f2 "$logs/norace.txt" | sort -u | paste -sd'|' -)"
	pkgs="$(cut -f1 "$logs/norace.txt" | sort -u)"
	echo "$(wc -l <"$logs/norace.txt") tests in $(echo "$pkgs" | wc -l) packages"
	# shellcheck disable=SC2086 # one package per word
	go test -count=1 -timeout 10m -json -run "^(${names})\$" $pkgs 2>&1 | "$logs/testjson" filter -v -forbid-race-skips
else
	echo "no test depends on the race detector"
fi

# Tests behind a build tag: TestScannedOnce counts the inbound path's scans through the
# counting scanElement that only the transport_scancount build has.
step "tests behind build tags (transport_scancount)"
go test -race -count=1 -tags transport_scancount -run '^TestScannedOnce$' ./transport/

# The reliability benchmarks of issue 16, in their short versions; each prints its
# table and exits non-zero when a check fails. chaos: a three-instance cluster of real
# processes on loopback broken at random under load for a minute (about 2.5 minutes
# with its build). soak: two instances at 30% of the measured capacity for two minutes
# after a 40s warm-up (a 25ms tick fills the subscribers' resumption rings in it),
# checked for drift beside same-time references, so that neighbours on a shared
# machine do not fail it (about 3.5 minutes with its build). Full runs: bench/RESULTS.md.
step "chaos (60s)"
go run ./bench/cmd/chaos -duration 60s 2>&1 | tee "$logs/chaos.log" || fail "chaos (60s)" "$logs/chaos.log"

step "soak (2m)"
go run ./bench/cmd/soak -duration 2m -warmup 40s -tick 25ms -share 0.3 2>&1 | tee "$logs/soak.log" || fail "soak (2m)" "$logs/soak.log"

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
				cat "$logs/fuzz.log"; fail "fuzz $pkg $t"
			fi
		fi
	done
done

if [ -d bench/peers ]; then
	step "bench/peers module"
	(cd bench/peers && go vet ./... && go test -count=1 ./...)
fi

if [ "$failed" != 0 ]; then
	echo
	echo "FAILED:"
	printf '  %s\n' "${failures[@]}"
	exit 1
fi
echo "all checks passed"
