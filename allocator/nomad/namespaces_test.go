package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestJobKey: bare ids in the home namespace (a single-namespace agent's
// keys, state and checkpoint dirs are unchanged), "ns/id" elsewhere; the
// watch: home, the listed namespaces, or every one with "*".
func TestJobKey(t *testing.T) {
	for _, c := range []struct{ home, ns, id, want string }{
		{"default", "default", "train", "train"}, {"default", "", "train", "train"},
		{"default", "team-b", "train", "team-b/train"}, {"team-a", "team-a", "train", "train"},
		{"team-a", "default", "p/periodic-1", "default/p/periodic-1"},
	} {
		if got := JobKey(c.home, c.ns, c.id); got != c.want {
			t.Errorf("JobKey(%q, %q, %q) = %q, want %q", c.home, c.ns, c.id, got, c.want)
		}
	}
	for in, want := range map[string]string{"": "default", "*": "default", "team-a": "team-a"} {
		if got := HomeNamespace(in); got != want {
			t.Errorf("HomeNamespace(%q) = %q", in, got)
		}
	}
	b := &Backend{cfg: Config{Namespace: "team-a", Namespaces: []string{"team-b"}}}
	if !b.watched("team-a") || !b.watched("team-b") || b.watched("default") || !b.multi() || b.listOpts().Namespace != "*" {
		t.Errorf("watch of team-a + team-b: %v %v %v %v %q", b.watched("team-a"), b.watched("team-b"), b.watched("default"), b.multi(), b.listOpts().Namespace)
	}
	b = &Backend{cfg: Config{Namespace: "team-a", Namespaces: []string{"team-a"}}}
	if b.multi() || b.listOpts().Namespace != "team-a" {
		t.Errorf("watch of team-a alone lists %q", b.listOpts().Namespace)
	}
	b = &Backend{cfg: Config{Namespaces: []string{AllNamespaces}}}
	if !b.watched("anything") || b.listOpts().Namespace != "*" {
		t.Error("* does not watch every namespace")
	}
	b.cfg.CheckpointRoot = "/ck"
	for ns, want := range map[string]string{"default": "/ck", "team-b": "/ck/team-b"} {
		if got := b.checkpointRoot(&api.Job{Namespace: &ns}); got != want {
			t.Errorf("checkpoint root of a %s job: %q, want %q", ns, got, want)
		}
	}
}
