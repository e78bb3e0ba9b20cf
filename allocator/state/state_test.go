package state

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The Store itself is tested against a real Nomad in e2e/state_test.go.

func TestDecisionLifecycle(t *testing.T) {
	st := New()
	st.AddReceived("j1", "a100", 90*time.Second)
	st.AddReceived("j1", "a100", 30*time.Second)
	if st.Received["j1"]["a100"] != 120 {
		t.Fatalf("received %v", st.Received)
	}
	intents := []Intent{{Job: "j1", Action: "admit"}, {Namespace: "ml", Job: "j2", Action: "suspend"}}
	st.Begin(Decision{ID: "d", Round: 5, Intents: intents})
	intents[0].Applied = true // Begin copied the slice
	if st.Round != 5 || len(st.Pending()) != 2 {
		t.Fatalf("after Begin: round %d, pending %v", st.Round, st.Pending())
	}
	if st.MarkApplied("", "j2") { // wrong namespace
		t.Fatal("MarkApplied matched across namespaces")
	}
	if !st.MarkApplied("ml", "j2") || len(st.Pending()) != 1 || st.Pending()[0].Job != "j1" {
		t.Fatalf("pending %v", st.Pending())
	}
	st.Finish()
	if st.InFlight != nil || st.Pending() != nil || st.MarkApplied("", "j1") {
		t.Fatal("Finish left a decision")
	}
	st.RemoveJob("j1")
	if len(st.Received) != 0 {
		t.Fatal("RemoveJob kept the job")
	}
}

func TestChunkEncoding(t *testing.T) {
	raw := []byte(strings.Repeat(`{"job":"x","received_s":12.5}`, 5000))
	text, err := encodeChunked(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(text) >= len(raw)/4 {
		t.Fatalf("compressed %d to %d", len(raw), len(text))
	}
	back, err := decodeChunked(text)
	if err != nil || string(back) != string(raw) {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := decodeChunked("!!"); err == nil {
		t.Fatal("bad base64 accepted")
	}
}

func TestSaveBeforeLoad(t *testing.T) {
	c, err := api.NewClient(&api.Config{Address: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(c, Options{Path: "/rondo/x/"})
	if s.Path() != "rondo/x" {
		t.Fatalf("path %q", s.Path())
	}
	if err := s.Save(context.Background(), New()); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("Save before Load: %v", err)
	}
}
