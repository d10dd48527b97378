// Package tracing builds the OpenTelemetry tracer provider and propagator
// a trawl process hands to its parts, from OpenTelemetry's standard
// environment variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME,
// OTEL_TRACES_SAMPLER, OTEL_BSP_*, …).
//
// It is wiring for cmd/router and tests, so it lives under internal: the
// packages that make spans (api, fanout, shard) take a trace.TracerProvider
// in their configuration and never import this package.
//
// It must never install anything process-wide (no otel.SetTracerProvider,
// no global propagator) and must never export when the environment names
// no exporter: autoexport's default is an OTLP exporter to localhost, which
// would make every unconfigured process retry a collector that is not
// there.
package tracing
