//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package vector

// nativeLE: float32s are stored little-endian here, as on the wire.
const nativeLE = true
