#!/usr/bin/env bash
# Prints a directory holding Node.js of the version in .nvmrc (Node 24 LTS), installing it first
# when the machine's own node is older. The official Linux build comes from the npm registry
# (package node-linux-<arch>, the same binary nodejs.org ships), unpacked once into
# ~/.cache/lenstack/node-<version>. Use: export PATH="$(bash tools/scripts/node.sh):$PATH"
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
want="$(tr -d ' \n\r' <"$root/.nvmrc")"
have="$(node -p 'process.versions.node' 2>/dev/null || echo 0)"
if [[ "${have%%.*}" -ge "${want%%.*}" ]]; then
  dirname "$(command -v node)"
  exit 0
fi
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "no Node.js build for $(uname -m) on the npm registry: install Node $want yourself" >&2; exit 1 ;;
esac
dir="${LENSTACK_CACHE:-$HOME/.cache/lenstack}/node-$want"
if [[ ! -x "$dir/bin/node" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "installing Node.js $want (npm registry: node-linux-$arch@$want) into $dir" >&2
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$want" >/dev/null)
  mkdir -p "$dir.partial"
  tar xzf "$tmp"/node-linux-*.tgz -C "$dir.partial" --strip-components=1
  "$dir.partial/bin/node" --version >/dev/null
  rm -rf "$dir" && mv "$dir.partial" "$dir"
fi
echo "$dir/bin"
