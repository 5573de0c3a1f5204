#!/usr/bin/env bash
# Refreshes the console screenshots in docs/console (shown in the README's
# Console section): the browser test (internal/console TestBrowser) drives
# headless Chromium through every screen and saves each one.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$root/docs/console"
EDIWATCH_SCREENSHOTS="$root/docs/console" EDIWATCH_TEST_PKGS=./internal/console exec "$root/scripts/test.sh" -run '^TestBrowser$'
