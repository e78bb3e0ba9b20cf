package hcl

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// Class of a job: guaranteed work uses its VC's quota; opportunistic work
// uses any free GPU and may be preempted. Users write it as `priority =`
// and the rondo.priority meta (unchanged); in the code "priority" is
// Gavel's only.
type Class string

const (
	Guaranteed    Class = "guaranteed"
	Opportunistic Class = "opportunistic"
)

// JobPolicy is a job's `policy { ... }` stanza.
type JobPolicy struct {
	VC   string
	User string
	// Entity is the job's group inside its VC for the hierarchical
	// policies ("": its user's entity when the VC declares one, else the
	// VC's default entity; see the README).
	Entity string
	Class  Class // the stanza's priority field
	Weight float64
	Steps  int64
	Model  string
	// Profile names the job's CPU and memory sensitivity profile (a
	// Synergy model such as "alexnet", or a key such as "res18_2"): the
	// placement stage reads it ("": insensitive).
	Profile string
	SLO     time.Duration // 0: none
	// Elastic range in workers (group instances, each with the group's
	// GPU count); both 0: not elastic.
	ElasticMin, ElasticMax int
}

// Elastic reports whether the policy declares an elastic range.
func (p JobPolicy) Elastic() bool { return p.ElasticMax > 0 }

// Nomad meta keys carrying a JobPolicy on a job.
const (
	MetaVC       = "rondo.vc"
	MetaUser     = "rondo.user"
	MetaEntity   = "rondo.entity"
	MetaPriority = "rondo.priority"
	MetaWeight   = "rondo.weight"
	MetaSteps    = "rondo.steps"
	MetaModel    = "rondo.model"
	MetaSLO      = "rondo.slo"
	// MetaProfile names the CPU and memory sensitivity profile.
	MetaProfile = "rondo.profile"
	// MetaElastic is "min:max" workers, e.g. "1:4".
	MetaElastic = "rondo.elastic"
)

// ParseJobPolicy reads the policy stanza of a job file: a top-level
// `policy {}` block, or one inside `job "name" {}`. Other content is ignored
// (the rest of the job is Nomad's business).
func ParseJobPolicy(filename string, src []byte) (JobPolicy, hcl.Diagnostics) {
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return JobPolicy{}, diags
	}
	schema := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "policy"}, {Type: "job", LabelNames: []string{"name"}}}}
	content, _, d := f.Body.PartialContent(schema)
	diags = append(diags, d...)
	var found []*hcl.Block
	for _, b := range content.Blocks {
		if b.Type == "policy" {
			found = append(found, b)
			continue
		}
		inner, _, d := b.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "policy"}}})
		diags = append(diags, d...)
		found = append(found, inner.Blocks...)
	}
	if len(found) == 0 {
		return JobPolicy{}, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing policy block",
			Detail: filename + " has no policy { } stanza"})
	}
	if len(found) > 1 {
		return JobPolicy{}, append(diags, errAt(found[1].DefRange, "Duplicate policy block", "a job has one policy stanza"))
	}
	p, d := DecodeJobPolicy(found[0].Body)
	return p, append(diags, d...)
}

// DecodeJobPolicy decodes the body of a policy block.
func DecodeJobPolicy(body hcl.Body) (JobPolicy, hcl.Diagnostics) {
	p := JobPolicy{Class: Guaranteed, Weight: 1}
	content, diags := body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "vc", Required: true}, {Name: "user"}, {Name: "entity"}, {Name: "priority"}, {Name: "weight"},
		{Name: "steps"}, {Name: "model"}, {Name: "profile"}, {Name: "slo"}},
		Blocks: []hcl.BlockHeaderSchema{{Type: "elastic"}}})
	str := func(name string, dst *string) *hcl.Attribute {
		a, ok := content.Attributes[name]
		if !ok {
			return nil
		}
		s, d := stringAttr(a)
		diags = append(diags, d...)
		*dst = s
		return a
	}
	str("vc", &p.VC)
	str("user", &p.User)
	str("model", &p.Model)
	str("profile", &p.Profile)
	n := len(diags)
	if a := str("entity", &p.Entity); a != nil && !diags[n:].HasErrors() {
		if err := CheckEntityName(p.Entity); err != nil {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid entity", fmt.Sprintf("entity = %q %v", p.Entity, err)))
		}
	}
	var prio, slo string
	if a := str("priority", &prio); a != nil && prio != "" {
		p.Class = Class(prio)
		if p.Class != Guaranteed && p.Class != Opportunistic {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid priority",
				fmt.Sprintf("priority = %q must be \"guaranteed\" or \"opportunistic\"", prio)))
		}
	}
	if a := str("slo", &slo); a != nil && slo != "" {
		d, err := time.ParseDuration(slo)
		if err != nil || d <= 0 {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid slo", fmt.Sprintf("slo = %q must be a positive duration such as \"12h\"", slo)))
		}
		p.SLO = d
	}
	if a, ok := content.Attributes["weight"]; ok {
		w, d := floatAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && w <= 0 {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid weight", "weight must be positive"))
		}
		p.Weight = w
	}
	if a, ok := content.Attributes["steps"]; ok {
		n, d := intAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && n <= 0 {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid steps", "steps must be positive"))
		}
		p.Steps = int64(n)
	}
	for i, b := range content.Blocks {
		if i > 0 {
			diags = append(diags, errAt(b.DefRange, "Duplicate elastic block", "a policy has one elastic block"))
			continue
		}
		p.ElasticMin, p.ElasticMax, diags = decodeElastic(b, diags)
	}
	if a, ok := content.Attributes["vc"]; ok && p.VC == "" && !diags.HasErrors() {
		diags = append(diags, errAt(a.Expr.Range(), "Invalid vc", "vc must not be empty"))
	}
	return p, diags
}

// decodeElastic reads `elastic { min = 1  max = 4 }` (workers; min ≥ 1,
// min ≤ max, whole numbers).
func decodeElastic(b *hcl.Block, diags hcl.Diagnostics) (int, int, hcl.Diagnostics) {
	c, d := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "min", Required: true}, {Name: "max", Required: true}}})
	diags = append(diags, d...)
	if d.HasErrors() {
		return 0, 0, diags
	}
	lo, d1 := intAttr(c.Attributes["min"])
	hi, d2 := intAttr(c.Attributes["max"])
	diags = append(append(diags, d1...), d2...)
	if d1.HasErrors() || d2.HasErrors() {
		return 0, 0, diags
	}
	if lo < 1 {
		diags = append(diags, errAt(c.Attributes["min"].Expr.Range(), "Invalid elastic min",
			fmt.Sprintf("elastic min = %d must be at least 1 worker", lo)))
	} else if hi < lo {
		diags = append(diags, errAt(c.Attributes["max"].Expr.Range(), "Invalid elastic max",
			fmt.Sprintf("elastic max = %d is below min = %d", hi, lo)))
	}
	return lo, hi, diags
}

// CheckEntityName says what is wrong with a job's entity name (nil: fine):
// it names an entity block of its VC, so it is not empty, has no
// surrounding spaces or control characters and is at most 128 bytes.
// Whether the VC declares it is known only to the allocator (an undeclared
// name puts the job in the VC's default entity).
func CheckEntityName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("must not be empty (leave the field out for none)")
	case len(s) > 128:
		return fmt.Errorf("is longer than 128 bytes")
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("must not start or end with a space")
	case strings.IndexFunc(s, unicode.IsControl) >= 0 || !utf8.ValidString(s):
		return fmt.Errorf("must be printable text")
	}
	return nil
}

// ParseElastic reads a "min:max" worker range (meta rondo.elastic).
func ParseElastic(v string) (int, int, error) {
	a, b, ok := strings.Cut(v, ":")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	switch {
	case !ok || err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf(`must be "min:max" workers, whole numbers, e.g. "1:4"`)
	case lo < 1:
		return 0, 0, fmt.Errorf("min must be at least 1 worker")
	case hi < lo:
		return 0, 0, fmt.Errorf("max is below min")
	case hi > 1<<16:
		return 0, 0, fmt.Errorf("max is out of range")
	}
	return lo, hi, nil
}

// ToMeta renders a policy as Nomad job meta; unset optional fields are left out.
func (p JobPolicy) ToMeta() map[string]string {
	m := map[string]string{MetaVC: p.VC, MetaPriority: string(p.Class),
		MetaWeight: strconv.FormatFloat(p.Weight, 'g', -1, 64)}
	if p.User != "" {
		m[MetaUser] = p.User
	}
	if p.Entity != "" {
		m[MetaEntity] = p.Entity
	}
	if p.Steps != 0 {
		m[MetaSteps] = strconv.FormatInt(p.Steps, 10)
	}
	if p.Model != "" {
		m[MetaModel] = p.Model
	}
	if p.Profile != "" {
		m[MetaProfile] = p.Profile
	}
	if p.SLO != 0 {
		m[MetaSLO] = p.SLO.String()
	}
	if p.Elastic() {
		m[MetaElastic] = fmt.Sprintf("%d:%d", p.ElasticMin, p.ElasticMax)
	}
	return m
}

// MetaError names the meta key that could not be read.
type MetaError struct {
	Key, Value, Reason string
}

func (e *MetaError) Error() string { return fmt.Sprintf("meta %s = %q: %s", e.Key, e.Value, e.Reason) }

// PolicyFromMeta reads a policy from Nomad job meta. Keys outside rondo.* are
// ignored; a missing rondo.vc is an error. Keys are checked in sorted order
// so the first error is deterministic.
func PolicyFromMeta(meta map[string]string) (JobPolicy, error) {
	p := JobPolicy{Class: Guaranteed, Weight: 1}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := meta[k]
		switch k {
		case MetaVC:
			if v == "" {
				return p, &MetaError{k, v, "must not be empty"}
			}
			p.VC = v
		case MetaUser:
			p.User = v
		case MetaEntity:
			if err := CheckEntityName(v); err != nil {
				return p, &MetaError{k, v, err.Error()}
			}
			p.Entity = v
		case MetaModel:
			p.Model = v
		case MetaProfile:
			p.Profile = v
		case MetaPriority:
			if Class(v) != Guaranteed && Class(v) != Opportunistic {
				return p, &MetaError{k, v, `must be "guaranteed" or "opportunistic"`}
			}
			p.Class = Class(v)
		case MetaWeight:
			w, err := strconv.ParseFloat(v, 64)
			if err != nil || !(w > 0) || w > 1e300 {
				return p, &MetaError{k, v, "must be a positive number"}
			}
			p.Weight = w
		case MetaSteps:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return p, &MetaError{k, v, "must be a positive integer"}
			}
			p.Steps = n
		case MetaSLO:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return p, &MetaError{k, v, "must be a positive duration such as 12h"}
			}
			p.SLO = d
		case MetaElastic:
			lo, hi, err := ParseElastic(v)
			if err != nil {
				return p, &MetaError{k, v, err.Error()}
			}
			p.ElasticMin, p.ElasticMax = lo, hi
		}
	}
	if p.VC == "" {
		return p, &MetaError{MetaVC, "", "missing"}
	}
	return p, nil
}
