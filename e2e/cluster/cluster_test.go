package cluster

import (
	"fmt"
	"net"
	"testing"
)

// FreePorts hands out distinct ports in 10000–19999, outside the kernel's
// ephemeral range, each bindable when handed out, also from goroutines at
// once.
func TestFreePorts(t *testing.T) {
	eLo, eHi := ephemeralRange()
	got := make(chan []int, 8)
	for g := 0; g < 8; g++ {
		go func() {
			ps, err := FreePorts(25)
			if err != nil {
				t.Error(err)
			}
			got <- ps
		}()
	}
	seen := map[int]bool{}
	for g := 0; g < 8; g++ {
		ps := <-got
		if len(ps) != 25 {
			t.Fatalf("%d ports, want 25", len(ps))
		}
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if p < portLo || p >= portHi || (p >= eLo && p <= eHi) {
				t.Fatalf("port %d outside %d-%d or inside the ephemeral range %d-%d", p, portLo, portHi-1, eLo, eHi)
			}
		}
	}
	// A port in use is skipped.
	next := portNext
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", next))
	if err != nil {
		t.Skipf("port %d taken: %v", next, err)
	}
	defer l.Close()
	ps, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	if ps[0] == next {
		t.Fatalf("port %d handed out while bound", next)
	}
}
