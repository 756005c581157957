#!/usr/bin/env bash
# Checks that rustdoc lists the same method names for the handles of every adapter
# (stellflow-tokio, stellflow-smol, stellflow-blocking): Client, Producer, Consumer, Admin.
# Trait methods (Clone, Debug, Stream, ...) are not counted: only inherent impls. The async
# handles are type aliases of stellflow-async's generic handles, whose impls rustdoc keeps in
# `type.impl/` (rendered on the alias page by script); the blocking ones are structs.
#
#   adapter-tests/check-api-names.sh        # from anywhere; builds the docs first
set -euo pipefail
cd "$(dirname "$0")/.."
cargo doc --no-deps -q -p stellflow-tokio -p stellflow-smol -p stellflow-blocking
DOC="${CARGO_TARGET_DIR:-target}/doc" python3 - <<'PY'
import glob, os, re, sys

doc = os.environ["DOC"]

def inherent(html):
    """Method names of the inherent impls in a chunk of rustdoc HTML."""
    names = set()
    for part in re.split(r'<section id=\\?"impl-', html)[1:]:
        if "-for-" in part.split('"', 1)[0]:
            continue  # a trait impl
        names |= set(re.findall(r'id=\\?"method\.([a-z_0-9]+)', part))
    return names

def alias(krate, handle):
    """Methods rustdoc lists on `krate::handle`, a type alias of stellflow-async's handle."""
    for js in glob.glob(f"{doc}/type.impl/stellflow_async/*/struct.{handle}.js"):
        text = open(js).read()
        entry = re.search(r'\["%s",\[(.*?)\]\]\]?[,\]]' % krate, text, re.S)
        if entry:
            return inherent(entry.group(1))
    return set()

def struct(krate, handle):
    html = open(f"{doc}/{krate}/struct.{handle}.html").read()
    html = html.split('id="trait-implementations"')[0]
    return inherent(html)

status = 0
for handle in ["Client", "Producer", "Consumer", "Admin"]:
    lists = {
        "tokio": alias("stellflow_tokio", handle),
        "smol": alias("stellflow_smol", handle),
        "blocking": struct("stellflow_blocking", handle),
    }
    if not lists["tokio"] or len({frozenset(v) for v in lists.values()}) != 1:
        status = 1
        print(f"{handle}: method names differ", file=sys.stderr)
        for name, methods in lists.items():
            print(f"  {name}: {sorted(methods)}", file=sys.stderr)
    else:
        print(f"{handle}: the same {len(lists['tokio'])} methods on tokio, smol and blocking: "
              + " ".join(sorted(lists["tokio"])))
sys.exit(status)
PY
