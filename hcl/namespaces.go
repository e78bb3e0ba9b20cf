package hcl

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Tenancy: a VC's namespaces (Kueue's LocalQueue → ClusterQueue mapping).
//
//	vc "research" { namespaces = ["team-a", "team-b"] }
//
// A job may use a VC only if its Nomad namespace is listed (VC.Admits). A VC
// without namespaces is open to every namespace (configs written before
// namespaces keep working). A namespace listed by several VCs may use any of
// them, as a Kueue namespace may hold LocalQueues of several ClusterQueues:
// the job's rondo.vc picks one.

// AllNamespaces is nomad { namespace = "*" }: the agent watches every
// namespace its token can read (Nomad's wildcard).
const AllNamespaces = "*"

// validNamespace is Nomad's rule for a namespace name
// (nomad/structs.validNamespaceName).
var validNamespace = regexp.MustCompile(`^[a-zA-Z0-9-]{1,128}$`)

// CheckNamespaceName reports whether s is a valid Nomad namespace name.
func CheckNamespaceName(s string) error {
	if !validNamespace.MatchString(s) {
		return fmt.Errorf("%q is not a Nomad namespace name (1 to 128 letters, digits or '-')", s)
	}
	return nil
}

// decodeNamespaces reads a VC's namespaces: a non-empty list of distinct
// namespace names (every error names the VC and the field).
func decodeNamespaces(a *hcl.Attribute, v *VC) hcl.Diagnostics {
	v.NamespacesRange = a.NameRange
	if _, d := value(a, cty.List(cty.String)); d.HasErrors() {
		return d
	}
	exprs, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		return diags
	}
	if len(exprs) == 0 {
		return hcl.Diagnostics{errAt(a.Expr.Range(), "Invalid namespaces",
			fmt.Sprintf("vc %q: namespaces: list at least one namespace (leave it out to open the VC to every namespace)", v.Name))}
	}
	for _, e := range exprs {
		val, d := valueExpr(e, cty.String, "namespaces")
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		ns := val.AsString()
		switch {
		case ns == AllNamespaces:
			diags = append(diags, errAt(e.Range(), "Invalid namespaces",
				fmt.Sprintf("vc %q: namespaces: %q is not a namespace (leave namespaces out to open the VC to every namespace)", v.Name, ns)))
		case CheckNamespaceName(ns) != nil:
			diags = append(diags, errAt(e.Range(), "Invalid namespaces",
				fmt.Sprintf("vc %q: namespaces: %v", v.Name, CheckNamespaceName(ns))))
		case slices.Contains(v.Namespaces, ns):
			diags = append(diags, errAt(e.Range(), "Duplicate namespace",
				fmt.Sprintf("vc %q: namespaces: %q is listed twice", v.Name, ns)))
		default:
			v.Namespaces = append(v.Namespaces, ns)
		}
	}
	return diags
}

// Admits reports whether a job of namespace ns may use the VC: it lists
// no namespaces, or ns.
func (v VC) Admits(ns string) bool {
	return len(v.Namespaces) == 0 || slices.Contains(v.Namespaces, ns)
}

// Namespaces is the union of the VCs' namespaces, sorted (nil when no VC
// lists any): with the configured namespace, what the agent watches.
func (c *Config) Namespaces() []string {
	var out []string
	for _, v := range c.VCs {
		for _, ns := range v.Namespaces {
			if !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkNomadNamespace: nomad { namespace } is a namespace name or "*".
func checkNomadNamespace(cfg *Config) hcl.Diagnostics {
	ns := cfg.Nomad.Namespace
	if ns == "" || ns == AllNamespaces || CheckNamespaceName(ns) == nil {
		return nil
	}
	return hcl.Diagnostics{errAt(cfg.Nomad.Range, "Invalid namespace",
		fmt.Sprintf("nomad: namespace: %v, or %q for every namespace", CheckNamespaceName(ns), AllNamespaces))}
}

// NamespaceList formats namespaces for reasons and logs ("team-a, team-b").
func NamespaceList(ns []string) string { return strings.Join(ns, ", ") }
