package main

// The read-only views of the running agent (status, job list, job status,
// vc status, node status) share one frame here: the flags (-rondo-addr, -token,
// -json, -t, -watch and the filters), fetching from the agent's API, and
// rendering as text, JSON or a Go template, once or every round. Each
// command supplies what it fetches and how its text looks.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/internal/rondotls"
)

// defaultAddr is the agent's status API when neither -rondo-addr nor RONDO_ADDR
// says otherwise.
const defaultAddr = "http://127.0.0.1:4700"

// filters says which of -vc, -user and -state a view takes.
type filters uint8

const (
	byVC filters = 1 << iota
	byUser
	byState
)

// jobStates are what -state takes: a job's state, or pending (not running
// and not done) or refused (a gandiva_fair VC refuses it).
var jobStates = []string{"running", "queued", "suspended", "done", "rejected", "unschedulable", "pending", "refused"}

// viewOptions are a view's flags.
type viewOptions struct {
	addr, token     string
	tls             rondotls.Files // -rondo-ca-cert, -rondo-client-cert, -rondo-client-key
	json            bool
	tmpl            string
	watch           bool
	interval        time.Duration
	count           int
	vc, user, state string
	states          []string
}

// view is one read-only command. get fetches what it shows (the value
// -json prints and -t executes on) with the status it read (-watch paces
// itself by its rounds); text prints that value for people.
type view struct {
	base
	o          viewOptions
	minArgs    int
	maxArgs    int
	get        func(ctx context.Context, c *agentClient, o *viewOptions, args []string) (v any, st *agent.Status, err error)
	text       func(w io.Writer, v any)
	hasFilters filters
	deprecated func() // warns when -addr was used
}

// newView makes a view command with the shared flags and the filters it
// takes.
func newView(name, synopsis, usage string, fs filters, minArgs, maxArgs int) *view {
	v := &view{base: newBase(name, synopsis, usage), minArgs: minArgs, maxArgs: maxArgs, hasFilters: fs}
	f := v.flags
	f.StringVar(&v.o.addr, "rondo-addr", "", "the agent's API (default $RONDO_ADDR, else "+defaultAddr+")")
	v.deprecated = aliasFlag(f, "addr", "rondo-addr", &v.o.addr, func(msg string) { fmt.Fprintln(v.stderr, "warning:", msg) })
	f.StringVar(&v.o.tls.CACert, "rondo-ca-cert", "", "CA certificate that signed the agent's (tls {}; default $RONDO_CACERT, else the system's roots)")
	f.StringVar(&v.o.tls.ClientCert, "rondo-client-cert", "", "client certificate for an agent with verify_https_client (default $RONDO_CLIENT_CERT)")
	f.StringVar(&v.o.tls.ClientKey, "rondo-client-key", "", "its key (default $RONDO_CLIENT_KEY)")
	f.StringVar(&v.o.token, "token", "", "Nomad ACL token sent as X-Nomad-Token (default $NOMAD_TOKEN)")
	f.BoolVar(&v.o.json, "json", false, "print the data as JSON")
	f.StringVar(&v.o.tmpl, "t", "", "format the data with a Go template (text/template over the JSON: {{.field}} by its JSON name)")
	f.BoolVar(&v.o.watch, "watch", false, "render again every round (the agent's round length, or -watch-interval) until Ctrl-C")
	f.DurationVar(&v.o.interval, "watch-interval", 0, "with -watch: the time between renders (default the agent's round length)")
	f.IntVar(&v.o.count, "watch-count", 0, "with -watch: stop after this many renders (0: until Ctrl-C; implies -watch)")
	if fs&byVC != 0 {
		f.StringVar(&v.o.vc, "vc", "", "only this virtual cluster's")
	}
	if fs&byUser != 0 {
		f.StringVar(&v.o.user, "user", "", "only this user's jobs")
	}
	if fs&byState != 0 {
		f.StringVar(&v.o.state, "state", "", "only jobs in these states, comma-separated: "+strings.Join(jobStates, ", "))
	}
	return v
}

func (v *view) Run(args []string) int {
	// Flags may follow the arguments (rondo job status JOB -json).
	var pos []string
	for {
		if code := v.parse(args); code >= 0 {
			return code
		}
		if args = v.flags.Args(); len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	v.deprecated()
	o := &v.o
	if n := len(pos); n < v.minArgs || n > v.maxArgs {
		want := fmt.Sprintf("%d", v.minArgs)
		if v.maxArgs > v.minArgs {
			want = fmt.Sprintf("at most %d", v.maxArgs)
		}
		return v.fail(fmt.Errorf("want %s arguments (%s), got %d", want, v.usage, n))
	}
	if o.json && o.tmpl != "" {
		return v.fail(errors.New("-json and -t exclude each other"))
	}
	if o.count < 0 {
		return v.fail(fmt.Errorf("-watch-count %d: want 0 or more", o.count))
	}
	if o.state != "" {
		for _, s := range strings.Split(o.state, ",") {
			if s = strings.TrimSpace(s); !slices.Contains(jobStates, s) {
				return v.fail(fmt.Errorf("-state %q: want %s", s, strings.Join(jobStates, ", ")))
			}
			o.states = append(o.states, s)
		}
	}
	var tmpl *template.Template
	if o.tmpl != "" {
		var err error
		if tmpl, err = template.New("t").Funcs(templateFuncs).Parse(o.tmpl); err != nil {
			return v.fail(err)
		}
	}
	c, err := newAgentClient(o.addr, o.token, o.tls)
	if err != nil {
		return v.fail(err)
	}
	watching := o.watch || o.count > 0
	ctx := context.Background()
	if watching {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	tty := isTerminal(v.stdout)
	for n := 1; ; n++ {
		data, st, err := v.get(ctx, c, o, pos)
		switch {
		case err != nil && !watching:
			return v.fail(err)
		case err != nil:
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(v.stderr, "rondo %s: %s\n", v.name, strings.ReplaceAll(err.Error(), "\n", "; "))
		default:
			if watching {
				if tty {
					fmt.Fprint(v.stdout, "\x1b[H\x1b[2J") // clear the screen
				} else if n > 1 && !o.json && tmpl == nil {
					fmt.Fprintln(v.stdout)
				}
			}
			if err := v.render(data, tmpl); err != nil {
				return v.fail(err)
			}
		}
		if !watching || (o.count > 0 && n >= o.count) {
			return 0
		}
		wait := o.interval
		if wait <= 0 {
			wait = nextRender(st, time.Now())
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(wait):
		}
	}
}

// nextRender is how long -watch waits for the next round: until just after
// the agent's next round when the status says when that is, else a round
// length (10 s when unknown).
func nextRender(st *agent.Status, now time.Time) time.Duration {
	round := 10 * time.Second
	if st != nil && st.RoundSeconds > 0 {
		round = time.Duration(st.RoundSeconds * float64(time.Second))
	}
	if st != nil && !st.NextRound.IsZero() {
		if d := st.NextRound.Sub(now); d > 0 && d <= round {
			return d + 500*time.Millisecond // the round's decision recorded
		}
	}
	return round
}

// render prints data as JSON, through the template, or as the view's text.
func (v *view) render(data any, tmpl *template.Template) error {
	switch {
	case v.o.json:
		enc := json.NewEncoder(v.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(data)
	case tmpl != nil:
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		var shaped any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber() // numbers print as -json prints them
		if err := d.Decode(&shaped); err != nil {
			return err
		}
		return tmpl.Execute(v.stdout, shaped)
	}
	v.text(v.stdout, data)
	return nil
}

// templateFuncs are the functions -t templates may call besides text/template's.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"join": func(sep string, v any) string {
		var parts []string
		if l, ok := v.([]any); ok {
			for _, e := range l {
				parts = append(parts, fmt.Sprint(e))
			}
		}
		return strings.Join(parts, sep)
	},
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// keepJob reports whether a job passes the -vc, -user and -state filters.
func (o *viewOptions) keepJob(j agent.JobStatus) bool {
	if o.vc != "" && j.VC != o.vc {
		return false
	}
	if o.user != "" && j.User != o.user {
		return false
	}
	if len(o.states) == 0 {
		return true
	}
	for _, s := range o.states {
		switch {
		case s == j.State,
			s == "pending" && j.State != "running" && j.State != "done",
			s == "refused" && j.Refused != "":
			return true
		}
	}
	return false
}

// jobs returns the jobs that pass the filters (never nil: -json prints []).
func (o *viewOptions) jobs(js []agent.JobStatus) []agent.JobStatus {
	out := []agent.JobStatus{}
	for _, j := range js {
		if o.keepJob(j) {
			out = append(out, j)
		}
	}
	return out
}

// agentClient reads the agent's API with the token.
type agentClient struct {
	addr, token string
	hc          *http.Client
}

// newAgentClient: addr "" is $RONDO_ADDR, else the default; an address
// without a scheme is http; token "" is $NOMAD_TOKEN; unset TLS files
// come from $RONDO_CACERT, $RONDO_CLIENT_CERT and $RONDO_CLIENT_KEY (an
// https:// agent with a private CA).
func newAgentClient(addr, token string, files rondotls.Files) (*agentClient, error) {
	if addr == "" {
		addr = os.Getenv("RONDO_ADDR")
	}
	if addr == "" {
		addr = defaultAddr
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	if token == "" {
		token = os.Getenv("NOMAD_TOKEN")
	}
	hc, err := files.FromEnv().HTTPClient(10 * time.Second)
	if err != nil {
		return nil, fmt.Errorf("rondo TLS: %w", err)
	}
	return &agentClient{addr: strings.TrimSuffix(addr, "/"), token: token, hc: hc}, nil
}

// errNotFound is a 404 from the agent.
var errNotFound = errors.New("not found")

// get decodes GET path into out; a 404 is errNotFound.
func (c *agentClient) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.addr+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("X-Nomad-Token", c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ua x509.UnknownAuthorityError
		if errors.As(err, &ua) {
			return fmt.Errorf("%w (give the CA that signed the agent's certificate with -rondo-ca-cert or RONDO_CACERT)", err)
		}
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return json.NewDecoder(resp.Body).Decode(out)
	case http.StatusNotFound:
		return errNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s%s: %s (give a Nomad ACL token with -token or NOMAD_TOKEN)", c.addr, path, resp.Status)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("%s%s: %s %s", c.addr, path, resp.Status, strings.TrimSpace(string(msg)))
}

// status reads GET /v1/status.
func (c *agentClient) status(ctx context.Context) (*agent.Status, error) {
	var s agent.Status
	if err := c.get(ctx, "/v1/status", &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// job reads GET /v1/jobs/{id} (the job with its history); an agent
// without that endpoint, or that does not know the job there, is asked
// for its status and the job looked up in it. found is false when neither
// lists the job.
func (c *agentClient) job(ctx context.Context, s *agent.Status, id string) (j agent.JobStatus, found bool, err error) {
	err = c.get(ctx, "/v1/jobs/"+url.PathEscape(id), &j)
	if err == nil {
		return j, true, nil
	}
	if !errors.Is(err, errNotFound) {
		return j, false, err
	}
	for _, j := range s.Jobs {
		if j.ID == id {
			return j, true, nil
		}
	}
	return j, false, nil
}
