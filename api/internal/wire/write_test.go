package wire_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

func TestWriteStatus(t *testing.T) {
	e := func(c coordinator.Code) *coordinator.Error { return &coordinator.Error{Code: c, Msg: "failed"} }
	for _, tc := range []struct {
		name string
		errs []*coordinator.Error
		want int
	}{
		{"all written", []*coordinator.Error{nil, nil}, http.StatusOK},
		{"none", nil, http.StatusOK},
		{"unavailable", []*coordinator.Error{nil, e(coordinator.CodeUnavailable)}, http.StatusServiceUnavailable},
		{"internal", []*coordinator.Error{e(coordinator.CodeInternal)}, http.StatusInternalServerError},
		{"first failure's status", []*coordinator.Error{e(coordinator.CodeInternal), e(coordinator.CodeUnavailable)}, http.StatusInternalServerError},
		{"conflict over others", []*coordinator.Error{e(coordinator.CodeUnavailable), e(coordinator.CodeConflict)}, http.StatusConflict},
		{"unknown outcome over all", []*coordinator.Error{e(coordinator.CodeConflict), e(coordinator.CodeOutcomeUnknown), e(coordinator.CodeInternal)}, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, wire.WriteStatus(tc.errs))
		})
	}
}
