package main

import (
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
)

// pprofHelp is the --pprof flag's help, the same for serve and shard.
const pprofHelp = "serve Go's profiles (net/http/pprof: CPU, heap, goroutine, block, mutex) under /debug/pprof/ on --http-addr, with block and mutex profiling on; off by default: whoever reaches that port may read them (so router serve refuses it with --api-key-file), and profiling costs a little CPU"

// Block and mutex sampling with --pprof: a blocking event of 100 µs or
// more is recorded with certainty, and one mutex contention in 10.
const (
	pprofBlockRateNs   = 100_000
	pprofMutexFraction = 10
	pprofPrefix        = "/debug/pprof/"
)

// withPprof serves next, and the profiles under /debug/pprof/, and turns
// on block and mutex profiling for the process.
func withPprof(next http.Handler) http.Handler {
	runtime.SetBlockProfileRate(pprofBlockRateNs)
	runtime.SetMutexProfileFraction(pprofMutexFraction)
	mux := http.NewServeMux()
	mux.HandleFunc(pprofPrefix, pprof.Index)
	mux.HandleFunc(pprofPrefix+"cmdline", pprof.Cmdline)
	mux.HandleFunc(pprofPrefix+"profile", pprof.Profile)
	mux.HandleFunc(pprofPrefix+"symbol", pprof.Symbol)
	mux.HandleFunc(pprofPrefix+"trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, pprofPrefix) {
			mux.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
