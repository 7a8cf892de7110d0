// Package dashboard is the operator dashboard's page: a single-page app
// (static/index.html, app.js, app.css; no framework, no build step)
// embedded in the binary and served by `starflow dev` and `starflow
// server` on the API's listener. Everything it shows and does goes
// through the public HTTP API (package httpserver), so a program can read
// and do the same; this package only serves the files. Decision 138 in
// docs/decisions.md says why it is a small SPA rather than server-rendered
// HTML.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Pages are the paths that answer with the page (the app routes on the
// path in the browser). Patterns for net/http's ServeMux.
var Pages = []string{
	"GET /{$}", "GET /runs", "GET /runs/{id}", "GET /definitions", "GET /definitions/{name}",
	"GET /dead-letters", "GET /health", "GET /sign-in", "GET /schedules",
}

// Assets is the ServeMux pattern of the page's scripts and styles.
const Assets = "GET /ui/{file}"

// CSP is the Content-Security-Policy of every answer of this package:
// scripts, styles and connections of this origin only, no frames, forms
// posting only here.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler serves the page at every path of Pages and its files under
// /ui/. The files are read once, at the first call.
func Handler() http.Handler {
	js := mustRead("static/app.js")
	css := mustRead("static/app.css")
	sum := sha256.New()
	sum.Write(js)
	sum.Write(css)
	version := hex.EncodeToString(sum.Sum(nil))[:12]
	index := bytes.ReplaceAll(mustRead("static/index.html"), []byte("{{VERSION}}"), []byte(version))
	files := map[string]struct {
		body []byte
		typ  string
	}{
		"app.js":  {js, "text/javascript; charset=utf-8"},
		"app.css": {css, "text/css; charset=utf-8"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", CSP)
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Frame-Options", "DENY")
		if strings.HasPrefix(r.URL.Path, "/ui/") {
			f, ok := files[r.PathValue("file")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			hdr.Set("Content-Type", f.typ)
			// The page names each file with the hash of both (?v=), so a
			// new binary's page never runs an old script.
			hdr.Set("Cache-Control", "public, max-age=86400")
			hdr.Set("ETag", `"`+version+`"`)
			if r.Header.Get("If-None-Match") == `"`+version+`"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Write(f.body)
			return
		}
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Cache-Control", "no-cache")
		w.Write(index)
	})
}

func mustRead(name string) []byte {
	b, err := static.ReadFile(name)
	if err != nil {
		panic("dashboard: embedded file missing: " + name) // a build without its files
	}
	return b
}
