package webui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The page's files are served under /ui/ with their types and a CSP that
// allows nothing from elsewhere; /ui/ is index.html.
func TestHandlerServesAssets(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /ui/", Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, typ := range map[string]string{"/ui/": "text/html", "/ui/app.js": "javascript", "/ui/style.css": "text/css"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), typ) || len(body) == 0 {
			t.Errorf("%s: %s, %q, %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
	resp, err := srv.Client().Get(srv.URL + "/ui/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("/ui/nope.js: %s", resp.Status)
	}
	if got := Files(); !slices.Equal(got, []string{"app.js", "index.html", "style.css"}) {
		t.Errorf("Files: %v", got)
	}
}

// Nothing is loaded from another origin: the page's src and href name its
// own files or anchors, and the script names no URL but SVG's namespace.
func TestNoExternalResources(t *testing.T) {
	html, _ := assets.ReadFile("assets/index.html")
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(html), -1) {
		if u := m[1]; strings.Contains(u, ":") || strings.HasPrefix(u, "//") {
			t.Errorf("index.html loads %q", u)
		}
	}
	for _, f := range []string{"assets/app.js", "assets/style.css"} {
		b, _ := assets.ReadFile(f)
		for _, u := range regexp.MustCompile(`\b(?:https?:)?//[a-zA-Z0-9.-]+\.[a-z]{2,}[^\s'")]*`).FindAllString(string(b), -1) {
			if u != "http://www.w3.org/2000/svg" {
				t.Errorf("%s names %q", f, u)
			}
		}
		if strings.Contains(string(b), "@import") {
			t.Errorf("%s imports", f)
		}
	}
}

// The ids and data attributes the e2e test and other tools read are there.
func TestStableIDs(t *testing.T) {
	html, _ := assets.ReadFile("assets/index.html")
	js, _ := assets.ReadFile("assets/app.js")
	for _, want := range []string{`<table id="jobs"`, `<ol id="timeline"`, `id="types"`, `id="vcs"`, `id="plot-usage"`, `id="plot-util"`,
		`id="plot-jct"`, `id="plot-vc-used"`, `id="filter-state"`, `id="filter-vc"`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	for _, want := range []string{`'data-job'`, `'data-state'`, `'data-intent'`, `X-Nomad-Token`, `v1/status`, `v1/timeline`, `v1/jobs/`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("app.js lacks %s", want)
		}
	}
}
