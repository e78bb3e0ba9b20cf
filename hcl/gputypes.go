package hcl

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// GPUTypeMap is a gpu_type block: the device plugin's model names (the
// Nomad device group name, as NVML reports it) that are the Rondo GPU type
// Name, in place of the name Rondo derives (allocator/nomad.DefaultGPUType):
//
//	gpu_type "a100-80g" {
//	  models = ["NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"]
//	}
//
// Names match exactly (case and spaces included): a model that merely
// resembles one is a type of its own, never merged by a guess.
type GPUTypeMap struct {
	Name   string
	Models []string
	// ModelRanges are each model string's range.
	ModelRanges []hcl.Range
	Range       hcl.Range // the block's header
}

// TypeNames is the config's model → type mapping of every gpu_type block
// (nil without any): the Nomad backend's Config.TypeNames.
func (c *Config) TypeNames() map[string]string {
	var out map[string]string
	for _, g := range c.GPUTypes {
		for _, m := range g.Models {
			if out == nil {
				out = map[string]string{}
			}
			out[m] = g.Name
		}
	}
	return out
}

// decodeGPUType reads one gpu_type block and checks it against the blocks
// already read (earlier files included): a type declared twice and a
// model mapped twice are errors at the later one, naming the first.
func decodeGPUType(b *hcl.Block, prev []GPUTypeMap) (GPUTypeMap, hcl.Diagnostics) {
	g := GPUTypeMap{Name: b.Labels[0], Range: b.DefRange}
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "models", Required: true}}})
	if !gpuTypeName.MatchString(g.Name) {
		diags = append(diags, errAt(b.LabelRanges[0], "Invalid gpu_type name",
			fmt.Sprintf("gpu_type %q: a GPU type is lowercase letters, digits, _ or -, starting with a letter", g.Name)))
	}
	for _, p := range prev {
		if p.Name == g.Name {
			diags = append(diags, errAt(b.LabelRanges[0], "Duplicate gpu_type",
				fmt.Sprintf("gpu_type %q is already declared at %s", g.Name, pos(p.Range))))
		}
	}
	a, ok := content.Attributes["models"]
	if !ok {
		return g, diags // Required: hcl reported it at the block
	}
	exprs, d := hcl.ExprList(a.Expr)
	if d.HasErrors() {
		return g, append(diags, errAt(a.Expr.Range(), "Invalid models",
			fmt.Sprintf("gpu_type %q: models must be a list of device model names, e.g. [\"NVIDIA A100-SXM4-80GB\"]", g.Name)))
	}
	if len(exprs) == 0 {
		return g, append(diags, errAt(a.Expr.Range(), "Invalid models",
			fmt.Sprintf("gpu_type %q: models is empty; name at least one device model", g.Name)))
	}
	for _, e := range exprs {
		s, d := valueExpr(e, cty.String, "models")
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		m := s.AsString()
		if strings.TrimSpace(m) == "" || strings.TrimSpace(m) != m {
			diags = append(diags, errAt(e.Range(), "Invalid models",
				fmt.Sprintf("gpu_type %q: model %q: want the device's model name exactly as the plugin reports it, without surrounding spaces", g.Name, m)))
			continue
		}
		if at, dup := modelAt(m, g, prev); dup {
			diags = append(diags, errAt(e.Range(), "Duplicate model",
				fmt.Sprintf("gpu_type %q: model %q is already mapped at %s", g.Name, m, at)))
			continue
		}
		g.Models = append(g.Models, m)
		g.ModelRanges = append(g.ModelRanges, e.Range())
	}
	return g, diags
}

// modelAt finds where model is already mapped: earlier in g or in prev.
func modelAt(model string, g GPUTypeMap, prev []GPUTypeMap) (string, bool) {
	for _, p := range append(prev, g) {
		for i, m := range p.Models {
			if m == model {
				return fmt.Sprintf("%s (gpu_type %q)", pos(p.ModelRanges[i]), p.Name), true
			}
		}
	}
	return "", false
}

// decodeThroughputs reads the top-level throughputs attribute: an
// operator's throughput file (the format of `rondo simulate
// --throughputs`, allocator/throughputs), relative to the config file's
// directory. hcl does not read it: cmd/rondo loads it, a bad file being an
// error at ThroughputsRange.
func decodeThroughputs(content *hcl.BodyContent, cfg *Config) hcl.Diagnostics {
	a, ok := content.Attributes["throughputs"]
	if !ok {
		return nil
	}
	var diags hcl.Diagnostics
	if cfg.ThroughputsRange != (hcl.Range{}) {
		diags = append(diags, errAt(a.NameRange, "Duplicate throughputs",
			fmt.Sprintf("throughputs is already set at %s", pos(cfg.ThroughputsRange))))
	}
	cfg.ThroughputsRange = a.Expr.Range()
	v, d := stringAttr(a)
	if diags = append(diags, d...); d.HasErrors() {
		return diags
	}
	if v == "" {
		return append(diags, errAt(a.Expr.Range(), "Invalid throughputs", "throughputs: want a file name"))
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(filepath.Dir(a.NameRange.Filename), v)
	}
	cfg.Throughputs = v
	return diags
}
