#!/usr/bin/env bash
# Builds awaken's example sandbox tools (examples/sandbox-tools/*) as WebAssembly WASI
# preview 1 command modules: bin/wasm/{wc,sha256,jsonq}.wasm.
#
# Usage: scripts/build-wasm-tools.sh [output-dir]   (default: bin/wasm)
# Honours GO (the go command, default "go"); run from anywhere inside the repository.
set -euo pipefail

GO=${GO:-go}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-"$root/bin/wasm"}
tools=(wc sha256 jsonq)

mkdir -p "$out"
stage=$(mktemp -d "${TMPDIR:-/tmp}/awaken-wasm-tools.XXXXXX")
trap 'rm -rf "$stage"' EXIT

pkgs=()
for t in "${tools[@]}"; do pkgs+=("./examples/sandbox-tools/$t"); done

# One go build for all tools: the go command builds them in parallel and names each
# output after its package directory; -trimpath keeps host paths out of the modules.
(cd "$root" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}" \
	"$GO" build -trimpath -o "$stage/" "${pkgs[@]}")

for t in "${tools[@]}"; do
	mv -f "$stage/$t" "$out/$t.wasm"
	echo "built $out/$t.wasm"
done
