// Package longtest splits the test suite in two: `make test` runs every
// test with -short, which skips the ones that call Mark; `make test-long`
// runs exactly those (the longtests command lists them), and .ci/run runs
// both.
//
// A test is long when it trains an index, measures recall on a large
// corpus, runs real processes, or waits out timeouts on purpose: the parts
// of the suite that made `make test` take many minutes on two cores. A
// short variant that still asserts the same property (one metric instead
// of three, a smaller corpus) belongs in `make test`; Mark goes inside the
// subtests that are long.
//
// It must never skip a test that `make test-long` cannot find: Find only
// sees direct calls of Mark in test files, so Mark is never wrapped in a
// helper.
package longtest
