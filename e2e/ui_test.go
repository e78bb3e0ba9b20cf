package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/e2e/cluster"
	"golang.org/x/net/html"
)

// uiConfig: two quota-only VCs on 2 V100 + 2 K80, each a share of one
// GPU per type: research rotates its three jobs (LAS: suspensions and
// resumptions), prod runs FIFO, so its third job waits while the first two
// hold prod's share.
const uiConfig = `round_seconds = 3
vc "research" {
  gpus   = { v100 = 1, k80 = 1 }
  policy = "max_min_fairness_perf"
}
vc "prod" {
  gpus   = { v100 = 1, k80 = 1 }
  policy = "fifo_perf"
}
`

// TestWebUIOnNomad: the agent's web page (/ui/, allocator/webui) in a real
// browser, Debian's headless Chromium, against a local Nomad cluster. Six
// never-finishing one-GPU jobs in two VCs; once prod's third job waits and
// a research job has been suspended, the page rendered by Chromium (its
// DOM after the scripts ran, --dump-dom) has a row per job with the
// state /v1/status gives, the waiting job's pending reason as the API says
// it, and a job's page (#job=ID) its rounds from /v1/jobs/{id}: at least
// its admission, each event with its intent. The page is opened with
// ?token= (it keeps the token and sends it as X-Nomad-Token); opened
// without one (ACLs are on) its files load, the API answers 401 and the
// page shows that and asks for a token.
//
// RONDO_SCREENSHOTS=DIR (make screenshots) also runs short jobs to their
// end (the average JCT) and adds a gang its VC can never hold, saves
// ui-jobs.png and ui-job.png in DIR, then removes research's jobs (its
// GPUs fall idle) and saves ui-overview.png and ui-vcs.png 30 s later.
func TestWebUIOnNomad(t *testing.T) {
	t.Parallel()        // no timing bound: runs beside another (e2e/README.md)
	br := newBrowser(t) // before the cluster: no Chromium fails at once
	shots := os.Getenv("RONDO_SCREENSHOTS")
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2), cluster.UniformClient("k80-a", "k80", 2)}, uiConfig)
	vcOf := map[string]string{}
	submit := func(id, vc string, steps int) {
		vcOf[id] = vc
		spec := strings.Replace(s.jobHCL(id, "ResNet-18 (batch size 64)", steps, 1), `"rondo.vc"    = "research"`, `"rondo.vc"    = "`+vc+`"`, 1)
		spec = strings.Replace(spec, `"rondo.steps"`, `"rondo.user"  = "`+map[string]string{"research": "alice", "prod": "bob"}[vc]+`"
    "rondo.steps"`, 1)
		s.submitSpec(id, spec)
	}
	for _, id := range []string{"p0", "p1", "p2"} {
		submit(id, "prod", 1000000000)
		time.Sleep(1100 * time.Millisecond) // FIFO's order
	}
	for _, id := range []string{"r0", "r1", "r2"} {
		submit(id, "research", 1000000000)
	}
	a := s.startAgent("3s")

	// prod's third job waits with its reason; a research job was suspended.
	var st agent.Status
	suspended := ""
	s.waitFor(120*time.Second, "p0, p1 running, p2 waiting with a pending reason, a research job suspended", func() (bool, error) {
		st = s.status(a)
		by := statusJobs(st)
		if by["p0"].State != "running" || by["p1"].State != "running" || by["p2"].State == "running" || by["p2"].State == "" {
			return false, nil
		}
		for _, id := range []string{"r0", "r1", "r2"} {
			if by[id].State == "suspended" {
				suspended = id
			}
		}
		return by["p2"].Pending != "" && suspended != "", nil
	})
	if shots != "" {
		for _, id := range []string{"short-a", "short-b", "short-c"} {
			submit(id, "research", 500) // prod's FIFO would never run them
		}
		// A gang of 2 in a VC of one GPU per type: its reason in the table.
		spec := strings.Replace(s.jobHCL("gang", "ResNet-18 (batch size 64)", 1000000000, 1), "count = 1", "count = 2", 1)
		s.submitSpec("gang", strings.Replace(spec, `"rondo.steps"`, `"rondo.user"  = "carol"
    "rondo.steps"`, 1))
		s.waitFor(240*time.Second, "the short jobs done", func() (bool, error) {
			by := statusJobs(s.status(a))
			return by["short-a"].State == "done" && by["short-b"].State == "done" && by["short-c"].State == "done", nil
		})
		time.Sleep(30 * time.Second) // more rounds in the plots
	}

	base := "http://" + a.addr + "/ui/?token=" + s.c.ManagementToken

	// The job table.
	doc := br.dumpDOM(base, 6*time.Second)
	st = s.status(a)
	if got := domAttr(domFirst(doc, func(n *html.Node) bool { return n.Data == "body" }), "data-loaded"); got != "true" {
		t.Fatalf("the page did not load /v1/status (body data-loaded=%q):\n%s", got, tail(domRender(doc), 3000))
	}
	rows := map[string]*html.Node{}
	for _, tr := range domAll(domByID(t, doc, "jobs"), func(n *html.Node) bool { return n.Data == "tr" && domAttr(n, "data-job") != "" }) {
		rows[domAttr(tr, "data-job")] = tr
	}
	for _, id := range []string{"p0", "p1", "p2", "r0", "r1", "r2"} {
		tr := rows[id]
		if tr == nil {
			t.Fatalf("the job table has no row for %s (rows: %v)", id, sortedKeys(rows))
		}
		state := domText(domFirst(tr, domHasClass("state")))
		if domAttr(tr, "data-state") != state || state == "" {
			t.Errorf("job %s: row data-state %q, state cell %q", id, domAttr(tr, "data-state"), state)
		}
		if vc := domText(domFirst(tr, domHasClass("vc"))); vc != vcOf[id] {
			t.Errorf("job %s: VC cell %q, want %q", id, vc, vcOf[id])
		}
	}
	// The states: prod's are fixed (FIFO); research's rotate, so the page's
	// state is one the job has had (it was loaded a moment before st).
	for _, id := range []string{"p0", "p1"} {
		if got := domAttr(rows[id], "data-state"); got != "running" {
			t.Errorf("job %s: page says %q, want running", id, got)
		}
	}
	p2 := statusJobs(st)["p2"]
	if got := domAttr(rows["p2"], "data-state"); got != p2.State {
		t.Errorf("job p2: page says %q, the API %q", got, p2.State)
	}
	reason := domFirst(rows["p2"], domHasClass("reason"))
	if got := domText(reason); got != p2.Pending || !domHasClass("pending")(reason) {
		t.Errorf("job p2: reason cell %q (class %q), want the pending reason %q", got, domAttr(reason, "class"), p2.Pending)
	}
	t.Logf("p2 waits: %q (queue position %d)", p2.Pending, p2.QueuePosition)

	// Without a token (a fresh browser profile) the files load, the API
	// refuses and the page asks for a token.
	doc = br.dumpDOM("http://"+a.addr+"/ui", 3*time.Second)
	conn, form := domByID(t, doc, "conn"), domByID(t, doc, "token-form")
	if domAttr(conn, "data-conn") != "denied" || domHas(form, "hidden") {
		t.Errorf("without a token: connection %q, token form hidden %v; want denied and the form shown", domAttr(conn, "data-conn"), domHas(form, "hidden"))
	}

	// A suspended job's rounds: its page against /v1/jobs/{id}.
	hist := s.jobHistory(a, suspended)
	doc = br.dumpDOM(base+"#job="+suspended, 6*time.Second)
	var intents []string
	for _, li := range domAll(domByID(t, doc, "timeline"), func(n *html.Node) bool { return n.Data == "li" }) {
		intents = append(intents, domAttr(li, "data-intent"))
		if domAttr(li, "data-round") == "" || domText(domFirst(li, domHasClass("intent"))) != domAttr(li, "data-intent") {
			t.Errorf("timeline item %q: round %q, intent text %q", domRender(li), domAttr(li, "data-round"), domText(domFirst(li, domHasClass("intent"))))
		}
	}
	want := make([]string, len(hist))
	for i, ev := range hist {
		want[i] = ev.Intent
	}
	if !slices.Contains(intents, "admit") || len(intents) < len(want) || !slices.Equal(intents[:len(want)], want) {
		t.Errorf("job %s's timeline on the page: %v; its history: %v (at least an admit)", suspended, intents, want)
	}
	if !slices.Contains(intents, "suspend") {
		t.Errorf("job %s was suspended; its timeline %v has no suspend", suspended, intents)
	}
	if got := domText(domByID(t, doc, "job-id")); got != suspended {
		t.Errorf("job page heading %q, want %s", got, suspended)
	}
	t.Logf("job %s on the page: %v", suspended, intents)

	if shots != "" {
		dir, err := filepath.Abs(shots)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		shot := func(name, frag string, h int) {
			br.screenshot(base+frag, filepath.Join(dir, "ui-"+name+".png"), 1280, h, 6*time.Second)
		}
		shot("jobs", "#jobs", 580)
		shot("job", "#job="+suspended, 760)
		// research's jobs leave: its GPUs idle (its gang can never run,
		// prod is at its share), the plots show the drop.
		for _, id := range []string{"r0", "r1", "r2"} {
			if _, _, err := s.c.API.Jobs().Deregister(id, true, nil); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(30 * time.Second)
		shot("overview", "", 1250)
		shot("vcs", "#vcs", 560)
		t.Logf("screenshots in %s", dir)
	}
}

func statusJobs(st agent.Status) map[string]agent.JobStatus {
	out := map[string]agent.JobStatus{}
	for _, j := range st.Jobs {
		out[j.ID] = j
	}
	return out
}

// jobHistory is GET /v1/jobs/{id}'s history of rounds.
func (s *stack) jobHistory(a *agentProc, id string) []agent.RoundEvent {
	s.t.Helper()
	req, _ := http.NewRequest("GET", "http://"+a.addr+"/v1/jobs/"+id, nil)
	req.Header.Set("X-Nomad-Token", s.c.ManagementToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var js agent.JobStatus
	if resp.StatusCode != 200 {
		s.t.Fatalf("GET /v1/jobs/%s: %s", id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&js); err != nil {
		s.t.Fatal(err)
	}
	return js.History
}

// browser runs Debian's headless Chromium, each run in a fresh profile.
type browser struct {
	t   *testing.T
	bin string
}

// newBrowser finds Chromium ($CHROMIUM, else chromium or chromium-browser
// in PATH). Without it the test fails: the page is tested in a real
// browser or not at all.
func newBrowser(t *testing.T) *browser {
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return &browser{t: t, bin: p}
		}
	}
	t.Fatal("the web page's test needs a headless Chromium and none was found (chromium, chromium-browser, $CHROMIUM): " +
		"install Debian's chromium (scripts/deps.sh does as root: apt-get install -y chromium)")
	return nil
}

// run runs Chromium headless on url with args, in a fresh profile, and
// returns its stdout. budget is the page's virtual time (its timers run;
// its requests are waited for).
func (b *browser) run(url string, budget time.Duration, args ...string) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{"--headless", "--disable-gpu", "--no-sandbox", // --no-sandbox: root, containers; the page is our own
		"--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--mute-audio",
		"--user-data-dir=" + b.t.TempDir(), fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds())}, args...)
	cmd := exec.CommandContext(ctx, b.bin, append(all, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.t.Fatalf("%s %s: %v\n%s", b.bin, strings.Join(args, " "), err, tail(stderr.String(), 3000))
	}
	return out
}

// dumpDOM is the page's DOM once its scripts ran for budget.
func (b *browser) dumpDOM(url string, budget time.Duration) *html.Node {
	b.t.Helper()
	out := b.run(url, budget, "--dump-dom")
	doc, err := html.Parse(strings.NewReader(string(out)))
	if err != nil {
		b.t.Fatalf("the dumped DOM of %s: %v", url, err)
	}
	return doc
}

// screenshot saves the page, w × h pixels, as a PNG.
func (b *browser) screenshot(url, path string, w, h int, budget time.Duration) {
	b.t.Helper()
	b.run(url, budget, "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+path)
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		b.t.Fatalf("screenshot %s: %v", path, err)
	}
}

// DOM helpers.

func domAll(n *html.Node, f func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && f(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	if n != nil {
		walk(n)
	}
	return out
}

func domFirst(n *html.Node, f func(*html.Node) bool) *html.Node {
	if all := domAll(n, f); len(all) > 0 {
		return all[0]
	}
	return nil
}

func domByID(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	n := domFirst(doc, func(n *html.Node) bool { return domAttr(n, "id") == id })
	if n == nil {
		t.Fatalf("the page has no #%s:\n%s", id, tail(domRender(doc), 3000))
	}
	return n
}

func domAttr(n *html.Node, key string) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// domHas says whether n has the attribute key (a boolean one: hidden).
func domHas(n *html.Node, key string) bool {
	return n != nil && slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == key })
}

func domHasClass(c string) func(*html.Node) bool {
	return func(n *html.Node) bool { return slices.Contains(strings.Fields(domAttr(n, "class")), c) }
}

// text is n's text content, spaces collapsed.
func domText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	if n != nil {
		walk(n)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func domRender(n *html.Node) string {
	var b strings.Builder
	html.Render(&b, n)
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
