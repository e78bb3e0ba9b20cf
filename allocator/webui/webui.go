// Package webui is the agent's web status page (/ui/): hand-written
// static assets (assets/index.html, app.js, style.css; no framework,
// nothing fetched from elsewhere) embedded in the binary. The page reads
// the agent's JSON API (/v1/status, /v1/timeline, /v1/jobs/{id}) from the
// same origin and draws its plots as inline SVG.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// csp allows the page its own assets and its own API only: no inline
// script, nothing from another origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page's files under /ui/ (mount it at "/ui/"):
// /ui/ is index.html.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache") // a new agent build serves its own page
		files.ServeHTTP(w, r)
	})
}

// Files lists the embedded assets (tests, the README).
func Files() []string {
	var out []string
	fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p[len("assets/"):])
		}
		return nil
	})
	return out
}
