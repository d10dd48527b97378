package httpx

import (
	"fmt"
	"net/url"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// BoolParam reads the query parameter name: "true" or "false", def when
// absent, a 400 naming it otherwise.
func BoolParam(q url.Values, name string, def bool) (bool, error) {
	switch v := q.Get(name); v {
	case "":
		return def, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, wire.Invalid(fmt.Sprintf("%s is %q, want true or false", name, v))
	}
}
