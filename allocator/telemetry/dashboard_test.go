package telemetry

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
)

// TestDashboardMetricsExist parses every PromQL expression of the Grafana
// dashboard (docs/grafana/rondo.json; its panels' targets and its
// variables' label_values queries), extracts the metric names (without
// _bucket, _sum, _count) and checks each is exported by a Telemetry after
// one recorded round, scraping its handler.
func TestDashboardMetricsExist(t *testing.T) {
	data, err := os.ReadFile("../../docs/grafana/rondo.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	tel, err := New()
	if err != nil {
		t.Fatal(err)
	}
	tel.SetVCs([]VCQuota{{Name: "a", GPUs: map[string]int{"v100": 1}}, {Name: "b", GPUs: map[string]int{"k80": 1}}})
	tel.SetVCUsage([]VCUsage{{Name: "a", Quota: map[string]int{"v100": 1}, Used: map[string]int{"v100": 1}},
		{Name: "b", Quota: map[string]int{"k80": 1}}})
	s, p := snapshotAndPlan()
	tel.Round(time.Second, s, p)
	tel.RoundEnded(nil)
	tel.SetLeader(true)
	exported := map[string]bool{}
	for _, line := range strings.Split(scrape(t, tel), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			exported[f[2]] = true
		}
	}

	used := map[string]bool{}
	exprs := 0
	var walk func(ps []dashPanel)
	walk = func(ps []dashPanel) {
		for _, pn := range ps {
			walk(pn.Panels)
			for _, tg := range pn.Targets {
				exprs++
				names, err := promqlMetrics(tg.Expr)
				if err != nil {
					t.Errorf("panel %q: %s: %v", pn.Title, tg.Expr, err)
				}
				for _, n := range names {
					used[n] = true
				}
			}
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_]+\s*\)$`)
	for _, v := range dash.Templating.List {
		q := v.Query
		if m, ok := q.(map[string]any); ok {
			q = m["query"]
		}
		qs, _ := q.(string)
		m := labelValues.FindStringSubmatch(qs)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, qs)
			continue
		}
		used[m[1]] = true
	}
	if exprs < 10 {
		t.Fatalf("only %d expressions in the dashboard", exprs)
	}
	for n := range used {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && exported[b] {
				base = b
			}
		}
		if !exported[base] {
			t.Errorf("the dashboard reads %s, which the agent does not export", n)
		}
	}
	// The panels the issue asks for are there.
	for _, want := range []string{"rondo_gpus_used", "rondo_gpu_utilization", "rondo_jobs_pending", "rondo_admission_wait_seconds_bucket",
		"rondo_round_duration_seconds_bucket", "rondo_decisions_total", "rondo_vc_quota_gpus", "rondo_vc_used_gpus", "rondo_leader"} {
		if !used[want] {
			t.Errorf("the dashboard does not read %s", want)
		}
	}
}

type dashPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // a row's
}

// promqlFuncs are the PromQL functions and aggregations the dashboard may
// call.
var promqlFuncs = map[string]bool{"sum": true, "avg": true, "max": true, "min": true, "count": true, "rate": true, "irate": true,
	"increase": true, "histogram_quantile": true, "topk": true, "bottomk": true, "clamp_min": true, "clamp_max": true,
	"delta": true, "deriv": true, "avg_over_time": true, "max_over_time": true, "min_over_time": true, "label_replace": true,
	"vector": true, "scalar": true, "abs": true, "time": true}

var promqlKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true}

// promqlMetrics lexes a PromQL expression (Grafana's $variables replaced)
// and returns the metric names it selects: identifiers that are not
// functions, keywords, label names (inside {} or after by/without/on/
// ignoring) or inside a range's []. It checks that brackets balance,
// strings end, functions are known and every name is rondo_….
func promqlMetrics(expr string) ([]string, error) {
	e := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h").Replace(expr)
	if strings.Contains(strings.ReplaceAll(e, `"$vc"`, ""), "$") {
		return nil, fmt.Errorf("an unknown Grafana variable")
	}
	type tok struct{ kind, s string }
	var toks []tok
	for i := 0; i < len(e); {
		c := rune(e[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`':
			j := strings.IndexRune(e[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, tok{"str", e[i : i+j+2]})
			i += j + 2
		case c == '_' || c == ':' || unicode.IsLetter(c):
			j := i
			for j < len(e) && (e[j] == '_' || e[j] == ':' || unicode.IsLetter(rune(e[j])) || unicode.IsDigit(rune(e[j]))) {
				j++
			}
			toks = append(toks, tok{"id", e[i:j]})
			i = j
		case unicode.IsDigit(c) || c == '.':
			j := i
			for j < len(e) && (unicode.IsDigit(rune(e[j])) || e[j] == '.' || unicode.IsLetter(rune(e[j]))) {
				j++ // numbers and durations (5m)
			}
			toks = append(toks, tok{"num", e[i:j]})
			i = j
		case strings.ContainsRune("(){}[],", c):
			toks = append(toks, tok{"p", string(c)})
			i++
		case strings.ContainsRune("+-*/%^=!<>~", c):
			toks = append(toks, tok{"op", string(c)})
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at %d", c, i)
		}
	}
	var names []string
	var stack []string
	labelList := false // the next ( opens a label list
	for k, tk := range toks {
		next := ""
		if k+1 < len(toks) {
			next = toks[k+1].s
		}
		switch {
		case tk.kind == "p" && (tk.s == "(" || tk.s == "{" || tk.s == "["):
			open := tk.s
			if tk.s == "(" && labelList {
				open = "labels"
			}
			labelList = false
			stack = append(stack, open)
		case tk.kind == "p" && (tk.s == ")" || tk.s == "}" || tk.s == "]"):
			want := map[string]string{")": "(", "}": "{", "]": "["}[tk.s]
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced %s", tk.s)
			}
			top := stack[len(stack)-1]
			if top != want && !(top == "labels" && tk.s == ")") {
				return nil, fmt.Errorf("%s closes %s", tk.s, top)
			}
			stack = stack[:len(stack)-1]
		case tk.kind == "id":
			top := ""
			if len(stack) > 0 {
				top = stack[len(stack)-1]
			}
			switch {
			case top == "{" || top == "[" || top == "labels":
			case promqlKeywords[tk.s]:
				labelList = tk.s != "bool" && tk.s != "and" && tk.s != "or" && tk.s != "unless" && tk.s != "offset"
			case promqlFuncs[tk.s] && (next == "by" || next == "without"): // sum by (le) (...)
			case next == "(":
				if !promqlFuncs[tk.s] {
					return nil, fmt.Errorf("unknown function %s", tk.s)
				}
			default:
				if !strings.HasPrefix(tk.s, "rondo_") {
					return nil, fmt.Errorf("metric %s is not Rondo's", tk.s)
				}
				names = append(names, tk.s)
			}
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("unclosed %s", stack[len(stack)-1])
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no metric")
	}
	return names, nil
}

func TestPromqlMetrics(t *testing.T) {
	got, err := promqlMetrics(`histogram_quantile(0.9, sum by (le, vc) (rate(rondo_x_seconds_bucket{vc=~"$vc", le!="a b"}[$__rate_interval]))) / on (vc) group_left rondo_y`)
	if err != nil || strings.Join(got, ",") != "rondo_x_seconds_bucket,rondo_y" {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{`sum(rondo_x`, `rondo_x{a="b}`, `sum(rondo_x]`, `summ(rondo_x)`, `up`, `sum by (le) (rate(x[5m]))`, `rondo_x{vc="$other"}`} {
		if _, err := promqlMetrics(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
