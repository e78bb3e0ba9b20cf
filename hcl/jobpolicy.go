package hcl

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
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

	// The fields below are attributes of the elastic block (meta keys
	// rondo.ps, rondo.ps_group, rondo.epochs, rondo.batch_size,
	// rondo.scaling): they are only set on an elastic job.

	// PSGroup names the Nomad task group holding the job's parameter-server
	// tasks (CPU only), the second role of a DL2 job ("": one role, no
	// parameter servers).
	PSGroup string
	// PSMin and PSMax bound the PS group's count (instances of PSGroup);
	// both 0: no PS group. Set together with PSGroup.
	PSMin, PSMax int
	// Epochs is the total number of epochs the job trains (0: not said);
	// a positive, finite number, not necessarily whole.
	Epochs float64
	// BatchSize is the total batch size, split over the running workers
	// (0: not said); at least ElasticMax, so every worker gets a sample.
	BatchSize int
	// Scaling says how the job is rescaled: ScalingLive or
	// ScalingCheckpoint as written, or "" when the policy does not say,
	// which means ScalingLive (see ScalingMode). It is stored as written so
	// that policy and meta round-trip exactly.
	Scaling string
}

// Rescaling mechanisms of an elastic job (JobPolicy.Scaling).
const (
	// ScalingLive: the running workers read their count and their share
	// of the total batch from the lease API and rescale in place (default).
	ScalingLive = "live"
	// ScalingCheckpoint: the job is rescaled by a suspension to its
	// checkpoint and a restart at the new size.
	ScalingCheckpoint = "checkpoint"
)

// Elastic reports whether the policy declares an elastic range.
func (p JobPolicy) Elastic() bool { return p.ElasticMax > 0 }

// TwoRole reports whether the job declares a parameter-server group beside
// its workers (a DL2 two-role job).
func (p JobPolicy) TwoRole() bool { return p.PSMax > 0 }

// ScalingMode is the job's rescaling mechanism with the default applied:
// ScalingLive when Scaling is "".
func (p JobPolicy) ScalingMode() string {
	if p.Scaling == "" {
		return ScalingLive
	}
	return p.Scaling
}

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
	// MetaPS is the parameter-server group's "min:max" count, e.g. "1:8"
	// (JobPolicy.PSMin, PSMax); it needs MetaPSGroup and MetaElastic.
	MetaPS = "rondo.ps"
	// MetaPSGroup names the Nomad task group of the parameter servers
	// (JobPolicy.PSGroup); it needs MetaPS.
	MetaPSGroup = "rondo.ps_group"
	// MetaEpochs is the total number of epochs, a positive number such as
	// "30" (JobPolicy.Epochs); it needs MetaElastic.
	MetaEpochs = "rondo.epochs"
	// MetaBatchSize is the total batch size, a whole number no smaller
	// than the elastic max (JobPolicy.BatchSize); it needs MetaElastic.
	MetaBatchSize = "rondo.batch_size"
	// MetaScaling is "live" or "checkpoint" (JobPolicy.Scaling); it needs
	// MetaElastic.
	MetaScaling = "rondo.scaling"
)

// maxCount bounds a worker or parameter-server count (elastic and ps max),
// in the stanza and in meta alike.
const maxCount = 1 << 16

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
		} else if !d.HasErrors() && w > 1e300 { // as in meta: what is read must convert back
			diags = append(diags, errAt(a.Expr.Range(), "Invalid weight", "weight is out of range (at most 1e300)"))
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
		diags = append(diags, decodeElastic(b, &p)...)
	}
	if a, ok := content.Attributes["vc"]; ok && p.VC == "" && !diags.HasErrors() {
		diags = append(diags, errAt(a.Expr.Range(), "Invalid vc", "vc must not be empty"))
	}
	return p, diags
}

// decodeElastic reads the elastic block into p. Today's form is
// `elastic { min = 1  max = 4 }` (workers; min ≥ 1, min ≤ max, whole
// numbers); a DL2 job adds, all optional, `epochs` (a positive number),
// `batch_size` (the total batch, a whole number ≥ max), `scaling` ("live"
// or "checkpoint") and one `ps { group = "ps"  min = 1  max = 8 }` block,
// its parameter-server group. min and max stay required.
func decodeElastic(b *hcl.Block, p *JobPolicy) hcl.Diagnostics {
	c, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "min", Required: true}, {Name: "max", Required: true},
		{Name: "epochs"}, {Name: "batch_size"}, {Name: "scaling"}},
		Blocks: []hcl.BlockHeaderSchema{{Type: "ps"}}})
	bounds := false // min and max read and valid
	if minA, maxA := c.Attributes["min"], c.Attributes["max"]; minA != nil && maxA != nil {
		lo, d1 := intAttr(minA)
		hi, d2 := intAttr(maxA)
		diags = append(append(diags, d1...), d2...)
		if !d1.HasErrors() && !d2.HasErrors() {
			p.ElasticMin, p.ElasticMax = lo, hi
			d := rangeCheck(minA, maxA, "elastic", lo, hi, "worker", "workers")
			diags = append(diags, d...)
			bounds = !d.HasErrors()
		}
	}
	if a := c.Attributes["epochs"]; a != nil {
		const summary = "Invalid elastic epochs"
		f, d := floatExprNamed(a.Expr, "elastic epochs")
		switch {
		case d.HasErrors():
			diags = append(diags, renamed(d, summary)...)
		case math.IsInf(f, 0):
			diags = append(diags, errAt(a.Expr.Range(), summary, "elastic epochs is out of range"))
		case !(f > 0):
			diags = append(diags, errAt(a.Expr.Range(), summary,
				fmt.Sprintf("elastic epochs = %g must be positive (the total epochs to train)", f)))
		default:
			p.Epochs = f
		}
	}
	if a := c.Attributes["batch_size"]; a != nil {
		const summary = "Invalid elastic batch_size"
		n, d := intExprNamed(a.Expr, "elastic batch_size")
		switch {
		case d.HasErrors():
			diags = append(diags, renamed(d, summary)...)
		case n < 1:
			diags = append(diags, errAt(a.Expr.Range(), summary,
				fmt.Sprintf("elastic batch_size = %d must be positive (the total batch size)", n)))
		case bounds && n < p.ElasticMax:
			diags = append(diags, errAt(a.Expr.Range(), summary,
				fmt.Sprintf("elastic batch_size = %d is below max = %d: total batch below the maximum worker count", n, p.ElasticMax)))
		default:
			p.BatchSize = n
		}
	}
	if a := c.Attributes["scaling"]; a != nil {
		const summary = "Invalid elastic scaling"
		v, d := stringExprNamed(a.Expr, "elastic scaling")
		switch {
		case d.HasErrors():
			diags = append(diags, renamed(d, summary)...)
		case v != ScalingLive && v != ScalingCheckpoint:
			diags = append(diags, errAt(a.Expr.Range(), summary,
				fmt.Sprintf("elastic scaling = %q must be \"live\" or \"checkpoint\"", v)))
		default:
			p.Scaling = v
		}
	}
	for i, pb := range c.Blocks {
		if i > 0 {
			diags = append(diags, errAt(pb.DefRange, "Duplicate ps block", "an elastic block has one ps block"))
			continue
		}
		diags = append(diags, decodePS(pb, p)...)
	}
	return diags
}

// decodePS reads `ps { group = "ps"  min = 1  max = 8 }`, the
// parameter-server group of a two-role job: all three are required; min ≥
// 1, min ≤ max, whole numbers.
func decodePS(b *hcl.Block, p *JobPolicy) hcl.Diagnostics {
	c, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "group"}, {Name: "min"}, {Name: "max"}}})
	if a := c.Attributes["group"]; a == nil {
		diags = append(diags, errAt(b.DefRange, "Missing ps group",
			`a ps block names the Nomad task group of its parameter servers, e.g. group = "ps"`))
	} else if g, d := stringExprNamed(a.Expr, "ps group"); d.HasErrors() {
		diags = append(diags, renamed(d, "Invalid ps group")...)
	} else if err := checkGroupName(g); err != nil {
		diags = append(diags, errAt(a.Expr.Range(), "Invalid ps group", fmt.Sprintf("ps group = %q %v", g, err)))
	} else {
		p.PSGroup = g
	}
	minA, maxA := c.Attributes["min"], c.Attributes["max"]
	for _, m := range []struct {
		a    *hcl.Attribute
		name string
	}{{minA, "min"}, {maxA, "max"}} {
		if m.a == nil {
			diags = append(diags, errAt(b.DefRange, "Missing ps "+m.name,
				"a ps block bounds its parameter servers: min = 1  max = 8"))
		}
	}
	if minA == nil || maxA == nil {
		return diags
	}
	lo, d1 := intExprNamed(minA.Expr, "ps min")
	hi, d2 := intExprNamed(maxA.Expr, "ps max")
	diags = append(append(diags, renamed(d1, "Invalid ps min")...), renamed(d2, "Invalid ps max")...)
	if d1.HasErrors() || d2.HasErrors() {
		return diags
	}
	d := rangeCheck(minA, maxA, "ps", lo, hi, "parameter server", "parameter servers")
	if !d.HasErrors() {
		p.PSMin, p.PSMax = lo, hi
	}
	return append(diags, d...)
}

// rangeCheck is the one check of a block's min and max counts (elastic
// workers, ps parameter servers): min ≥ 1, max ≥ min, max ≤ maxCount, the
// error at the attribute at fault.
func rangeCheck(minA, maxA *hcl.Attribute, block string, lo, hi int, unit, units string) hcl.Diagnostics {
	switch {
	case lo < 1:
		return hcl.Diagnostics{errAt(minA.Expr.Range(), "Invalid "+block+" min",
			fmt.Sprintf("%s min = %d must be at least 1 %s", block, lo, unit))}
	case hi < lo:
		return hcl.Diagnostics{errAt(maxA.Expr.Range(), "Invalid "+block+" max",
			fmt.Sprintf("%s max = %d is below min = %d", block, hi, lo))}
	case hi > maxCount:
		return hcl.Diagnostics{errAt(maxA.Expr.Range(), "Invalid "+block+" max",
			fmt.Sprintf("%s max = %d is out of range (at most %d %s)", block, hi, maxCount, units))}
	}
	return nil
}

// renamed gives every error of d the summary s (one naming the field), so
// that a wrong type reads like the field's other errors.
func renamed(d hcl.Diagnostics, s string) hcl.Diagnostics {
	for _, x := range d {
		if x.Severity == hcl.DiagError {
			x.Summary = s
		}
	}
	return d
}

func floatExprNamed(e hcl.Expression, name string) (float64, hcl.Diagnostics) {
	v, d := valueExpr(e, cty.Number, name)
	if d.HasErrors() {
		return 0, d
	}
	f, _ := v.AsBigFloat().Float64()
	return f, nil
}

func stringExprNamed(e hcl.Expression, name string) (string, hcl.Diagnostics) {
	v, d := valueExpr(e, cty.String, name)
	if d.HasErrors() {
		return "", d
	}
	return v.AsString(), nil
}

// checkGroupName says what is wrong with a Nomad task group name (nil:
// fine): not empty, no surrounding spaces, printable text.
func checkGroupName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("must not be empty")
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("must not start or end with a space")
	case strings.IndexFunc(s, unicode.IsControl) >= 0 || !utf8.ValidString(s):
		return fmt.Errorf("must be printable text")
	}
	return nil
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
func ParseElastic(v string) (int, int, error) { return parseRange(v, "workers", "worker", "1:4") }

// ParsePS reads a "min:max" parameter-server range (meta rondo.ps).
func ParsePS(v string) (int, int, error) {
	return parseRange(v, "parameter servers", "parameter server", "1:8")
}

func parseRange(v, units, unit, example string) (int, int, error) {
	a, b, ok := strings.Cut(v, ":")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	switch {
	case !ok || err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf(`must be "min:max" %s, whole numbers, e.g. %q`, units, example)
	case lo < 1:
		return 0, 0, fmt.Errorf("min must be at least 1 %s", unit)
	case hi < lo:
		return 0, 0, fmt.Errorf("max is below min")
	case hi > maxCount:
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
	if p.TwoRole() {
		m[MetaPS] = fmt.Sprintf("%d:%d", p.PSMin, p.PSMax)
	}
	if p.PSGroup != "" {
		m[MetaPSGroup] = p.PSGroup
	}
	if p.Epochs != 0 {
		m[MetaEpochs] = strconv.FormatFloat(p.Epochs, 'g', -1, 64)
	}
	if p.BatchSize != 0 {
		m[MetaBatchSize] = strconv.Itoa(p.BatchSize)
	}
	if p.Scaling != "" {
		m[MetaScaling] = p.Scaling
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
// so the first error is deterministic; then the keys that depend on others:
// the elastic attributes (rondo.batch_size, rondo.epochs, rondo.ps,
// rondo.ps_group, rondo.scaling, in that order) need rondo.elastic, rondo.ps
// and rondo.ps_group need each other, and rondo.batch_size is at least the
// elastic max.
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
		case MetaPS:
			lo, hi, err := ParsePS(v)
			if err != nil {
				return p, &MetaError{k, v, err.Error()}
			}
			p.PSMin, p.PSMax = lo, hi
		case MetaPSGroup:
			if err := checkGroupName(v); err != nil {
				return p, &MetaError{k, v, err.Error()}
			}
			p.PSGroup = v
		case MetaEpochs:
			e, err := strconv.ParseFloat(v, 64)
			if err != nil || !(e > 0) || math.IsInf(e, 0) {
				return p, &MetaError{k, v, "must be a positive number"}
			}
			p.Epochs = e
		case MetaBatchSize:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > 1<<31 {
				return p, &MetaError{k, v, "must be a positive integer"}
			}
			p.BatchSize = int(n)
		case MetaScaling:
			if v != ScalingLive && v != ScalingCheckpoint {
				return p, &MetaError{k, v, `must be "live" or "checkpoint"`}
			}
			p.Scaling = v
		}
	}
	if p.VC == "" {
		return p, &MetaError{MetaVC, "", "missing"}
	}
	if !p.Elastic() {
		for _, k := range []string{MetaBatchSize, MetaEpochs, MetaPS, MetaPSGroup, MetaScaling} {
			if v, ok := meta[k]; ok {
				return p, &MetaError{k, v, "is an elastic attribute: it needs " + MetaElastic}
			}
		}
	}
	if _, ok := meta[MetaPSGroup]; p.TwoRole() && !ok {
		return p, &MetaError{MetaPSGroup, "", "missing: " + MetaPS + " needs the parameter servers' task group"}
	}
	if v, ok := meta[MetaPSGroup]; ok && !p.TwoRole() {
		return p, &MetaError{MetaPSGroup, v, "needs " + MetaPS + ` = "min:max" parameter servers`}
	}
	if p.BatchSize != 0 && p.BatchSize < p.ElasticMax {
		return p, &MetaError{MetaBatchSize, meta[MetaBatchSize],
			fmt.Sprintf("total batch below the maximum worker count (%s max = %d)", MetaElastic, p.ElasticMax)}
	}
	return p, nil
}
