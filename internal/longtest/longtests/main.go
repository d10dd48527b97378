// Command longtests prints the arguments for `go test` that run exactly
// the long tests (those calling longtest.Mark) of the module in the
// current directory, on one line: `make test-long` passes them on.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/trawl-search/trawl/internal/longtest"
)

func main() {
	tests, err := longtest.Find(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "longtests:", err)
		os.Exit(1)
	}
	if len(tests) == 0 {
		fmt.Fprintln(os.Stderr, "longtests: no test calls longtest.Mark")
		os.Exit(1)
	}
	fmt.Println(strings.Join(longtest.Args(tests), " "))
}
