package httpserver

import (
	"net/http"

	"github.com/starflow/starflow/internal/dashboard"
)

// registerDashboard serves the operator dashboard (package dashboard) on
// mux: the page at /, /runs, /runs/{id}, /definitions, /dead-letters,
// /schedules, /health and /sign-in, its files under /ui/. The page is public (it
// holds no data); everything it shows it reads from the API with the
// caller's key, kept in the HttpOnly cookie POST /ui/sign-in sets.
func registerDashboard(mux *http.ServeMux) {
	page := dashboard.Handler()
	for _, p := range dashboard.Pages {
		mux.Handle(p, page)
	}
	mux.Handle(dashboard.Assets, page)
}
