#!/usr/bin/env bash
# Checks that rustdoc lists the same method names for the handles of every adapter
# (stellflow-tokio, stellflow-smol, stellflow-blocking): Client, Producer, Consumer, Admin.
# Trait methods (Clone, Debug, Stream, ...) are not counted: only the inherent
# "Implementations" section of each page is read.
#
#   adapter-tests/check-api-names.sh        # from the workspace root; builds the docs first
set -euo pipefail
cd "$(dirname "$0")/.."
cargo doc --no-deps -q -p stellflow-tokio -p stellflow-smol -p stellflow-blocking
doc="${CARGO_TARGET_DIR:-target}/doc"

# Method names of the inherent impls on one rustdoc page.
methods() {
    sed -n '/id="implementations-list"/,/id="trait-implementations"/p' "$1" |
        grep -o 'id="method\.[a-z_0-9]*"' | sed 's/id="method\.//; s/"//' | sort -u
}

status=0
for handle in Client Producer Consumer Admin; do
    tokio=$(methods "$doc/stellflow_tokio/type.$handle.html")
    smol=$(methods "$doc/stellflow_smol/type.$handle.html")
    blocking=$(methods "$doc/stellflow_blocking/struct.$handle.html")
    if [ -z "$tokio" ]; then
        echo "$handle: no methods found in the tokio docs" >&2
        status=1
    fi
    if [ "$tokio" != "$blocking" ] || [ "$tokio" != "$smol" ]; then
        echo "$handle: method names differ" >&2
        diff <(echo "$tokio") <(echo "$blocking") >&2 || true
        status=1
    else
        echo "$handle: $(echo $tokio | wc -w) methods, the same on tokio, smol and blocking"
    fi
done
exit $status
