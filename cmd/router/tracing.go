package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/trawl-search/trawl/internal/tracing"
)

// tracingFlushTimeout bounds how long exit waits to flush queued spans.
const tracingFlushTimeout = 5 * time.Second

// startTracing builds the process's tracing from OTEL_* (off unless one of
// the exporter variables is set) and returns it with the function that
// flushes it at exit.
func startTracing(ctx context.Context, log *slog.Logger, service string) (*tracing.Tracing, func(), error) {
	t, err := tracing.FromEnv(ctx, service)
	if err != nil {
		return nil, nil, err
	}
	if !t.Enabled {
		return t, func() {}, nil
	}
	// The SDK reports export failures through otel's process-wide error
	// handler, which would print them with the standard logger; this is the
	// one otel global trawl sets, and only in main, so they land in the JSON
	// log. Providers and propagators are passed explicitly everywhere.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	log.Info("tracing on", "service", service)
	return t, func() {
		fctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := t.Shutdown(fctx); err != nil {
			log.Warn("tracing flush", "err", err)
		}
	}, nil
}
