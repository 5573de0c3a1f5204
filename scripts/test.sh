#!/usr/bin/env bash
# The one command that runs every ediwatch test.
#
# It installs what the tests need when it is missing (Debian packages gnupg,
# postgresql, openssh-server, systemd for systemd-analyze, and promtool
# from the prometheus package),
# starts a throwaway PostgreSQL and a throwaway OpenSSH sshd on free
# loopback ports in a temporary directory, runs `go vet` and
# `go test -race` over every package with their addresses in the
# environment, and stops them at the end. Under CI=true a test that cannot
# reach its service fails; it never skips.
#
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestCorpus);
# EDIWATCH_TEST_PKGS narrows the packages (default ./...), for a quick
# run of one package against the real services.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="/usr/local/go/bin:$PATH"

PG_FSYNC=off # tests need no durability across a machine crash
# shellcheck source=scripts/services.sh
. "$root/scripts/services.sh"

log "go vet ./..."
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || { log "gofmt would change: $unformatted"; exit 1; }
log "go test -race ./..."
# shellcheck disable=SC2086 # a list of package patterns
go test -race -count=1 -timeout 14m "$@" ${EDIWATCH_TEST_PKGS:-./...}
