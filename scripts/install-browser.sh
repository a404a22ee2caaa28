#!/usr/bin/env bash
# Installs headless Chromium for the browser tests (Debian's chromium package) when it is missing.
# Prints the browser's path on its last line.
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; exit 0; fi
done
if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >&2
    command -v chromium
else
    echo "install Chromium (Debian: apt-get install -y chromium), then rerun" >&2
    exit 1
fi
