//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package vector

// nativeLE: this architecture stores float32s big-endian (or is one the
// list in codec_le.go does not name), so the codec converts element by
// element.
const nativeLE = false
