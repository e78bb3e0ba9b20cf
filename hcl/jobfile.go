package hcl

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// SplitJobFile separates Rondo's `policy {}` stanza from a Nomad job file:
// it returns the policy (found reports whether there was one) and the file
// with the stanza blanked out, ready for Nomad's own parser. Blanking with
// spaces (newlines kept) leaves every other line and column where it was, so
// Nomad's errors still point at the user's file.
func SplitJobFile(filename string, src []byte) (p JobPolicy, found bool, rest []byte, diags hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return JobPolicy{}, false, nil, diags
	}
	body := f.Body.(*hclsyntax.Body)
	var blocks []*hclsyntax.Block
	for _, b := range body.Blocks {
		switch b.Type {
		case "policy":
			blocks = append(blocks, b)
		case "job":
			for _, inner := range b.Body.Blocks {
				if inner.Type == "policy" {
					blocks = append(blocks, inner)
				}
			}
		}
	}
	if len(blocks) == 0 {
		return JobPolicy{}, false, src, nil
	}
	if len(blocks) > 1 {
		return JobPolicy{}, false, nil, hcl.Diagnostics{errAt(blocks[1].DefRange(), "Duplicate policy block", "a job has one policy stanza")}
	}
	p, diags = DecodeJobPolicy(blocks[0].Body)
	if diags.HasErrors() {
		return JobPolicy{}, false, nil, diags
	}
	rest = append([]byte(nil), src...)
	r := blocks[0].Range()
	for i := r.Start.Byte; i < r.End.Byte && i < len(rest); i++ {
		if rest[i] != '\n' {
			rest[i] = ' '
		}
	}
	return p, true, rest, nil
}
