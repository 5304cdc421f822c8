package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
)

// handler is the HTTP handler of o's server.
func (o *opsServer) handler() http.Handler { return o.server().Handler() }

// readiness is what o's /readyz answers: its lines, and whether it is 200.
func (o *opsServer) readiness(ctx context.Context) ([]string, bool) {
	rec := httptest.NewRecorder()
	o.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil).WithContext(ctx))
	return strings.Split(strings.TrimSuffix(rec.Body.String(), "\n"), "\n"), rec.Code == http.StatusOK
}
