package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// DefaultPath is where the state lives unless Options.Path says otherwise.
const DefaultPath = "rondo/allocator"

// Nomad refuses a variable whose keys and values add up to more than 64 KiB.
// Stay well below it: the meta items and keys count too.
const (
	defaultInlineLimit = 56 * 1024
	defaultChunkSize   = 56 * 1024
	maxChunks          = 1024 // 56 MiB of compressed state: far beyond need; bounds a corrupt meta
)

// ErrConflict means another writer changed the state since this Store last
// loaded or saved it: a second allocator is running, or this one lost the
// leader lock. It is not retryable by saving again; reload (and check
// leadership) first.
var ErrConflict = errors.New("state: the allocator state was changed by another writer (check-and-set conflict)")

// ErrNotLoaded is returned by Save before the first Load.
var ErrNotLoaded = errors.New("state: Save before Load")

// Options configures a Store.
type Options struct {
	// Namespace of the variables; default "default".
	Namespace string
	// Path of the meta variable; chunks live under Path+"/a/" and
	// Path+"/b/". Default DefaultPath. Must match the token's policy
	// (rondo/*).
	Path string
	// InlineLimit is the largest JSON state kept inline in the meta
	// variable; larger states are compressed and chunked. Tests lower it.
	InlineLimit int
	// ChunkSize is the size of one chunk (base64 text).
	ChunkSize int
}

// Store persists a State in Nomad Variables. Small states live in one
// variable (one atomic CAS write). Large ones are gzip+base64 encoded and split
// across chunk variables in one of two slots, "a" and "b": Save writes the
// slot the meta variable does not point at, then flips the meta with CAS. A
// crash part-way leaves the meta pointing at the old, intact slot, so a
// reader never sees a torn state; the meta carries a SHA-256 of the chunks as
// a second check.
//
// A Store is safe for concurrent use, but it serialises Save calls: state is
// written by the one allocator loop.
type Store struct {
	vars *api.Variables
	opts Options

	mu     sync.Mutex
	loaded bool
	meta   uint64            // ModifyIndex of the meta variable last seen (0: absent)
	slot   string            // slot the meta points at ("" when inline)
	chunks map[string]uint64 // chunk path → ModifyIndex last seen
}

// NewStore returns a Store using c (whose token must allow variables under
// the path).
func NewStore(c *api.Client, o Options) *Store {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Path == "" {
		o.Path = DefaultPath
	}
	o.Path = strings.Trim(o.Path, "/")
	if o.InlineLimit <= 0 {
		o.InlineLimit = defaultInlineLimit
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = defaultChunkSize
	}
	return &Store{vars: c.Variables(), opts: o, chunks: map[string]uint64{}}
}

// Path is the meta variable's path.
func (s *Store) Path() string { return s.opts.Path }

func (s *Store) qo(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: s.opts.Namespace}).WithContext(ctx)
}

func (s *Store) wo(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{Namespace: s.opts.Namespace}).WithContext(ctx)
}

func (s *Store) chunkPath(slot string, i int) string {
	return s.opts.Path + "/" + slot + "/" + strconv.Itoa(i)
}

// Load reads the state; a missing state is an empty one. It also remembers
// the modify indexes that the next Save checks against.
func (s *Store) Load(ctx context.Context) (*State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	meta, _, err := s.vars.Peek(s.opts.Path, s.qo(ctx))
	if err != nil {
		return nil, fmt.Errorf("state: read %s: %w", s.opts.Path, err)
	}
	// Chunk indexes of both slots, for CAS on the next Save.
	chunks := map[string]uint64{}
	for _, slot := range []string{"a", "b"} {
		list, _, err := s.vars.PrefixList(s.opts.Path+"/"+slot+"/", s.qo(ctx))
		if err != nil {
			return nil, fmt.Errorf("state: list chunks: %w", err)
		}
		for _, m := range list {
			chunks[m.Path] = m.ModifyIndex
		}
	}
	if meta == nil {
		s.loaded, s.meta, s.slot, s.chunks = true, 0, "", chunks
		return New(), nil
	}

	var raw []byte
	slot := ""
	switch f := meta.Items["format"]; f {
	case "inline":
		raw = []byte(meta.Items["state"])
	case "chunked":
		slot = meta.Items["slot"]
		if slot != "a" && slot != "b" {
			return nil, fmt.Errorf("state: %s: bad slot %q", s.opts.Path, slot)
		}
		n, err := strconv.Atoi(meta.Items["chunks"])
		if err != nil || n < 1 || n > maxChunks {
			return nil, fmt.Errorf("state: %s: bad chunk count %q", s.opts.Path, meta.Items["chunks"])
		}
		var text strings.Builder
		for i := 0; i < n; i++ {
			p := s.chunkPath(slot, i)
			v, _, err := s.vars.Read(p, s.qo(ctx))
			if err != nil {
				return nil, fmt.Errorf("state: read chunk %s: %w", p, err)
			}
			chunks[p] = v.ModifyIndex
			text.WriteString(v.Items["data"])
		}
		sum := sha256.Sum256([]byte(text.String()))
		if hex.EncodeToString(sum[:]) != meta.Items["sha256"] {
			// Cannot happen with slot flipping unless someone edited the
			// variables by hand; refuse rather than guess.
			return nil, fmt.Errorf("state: %s: chunk checksum mismatch (slot %s)", s.opts.Path, slot)
		}
		if raw, err = decodeChunked(text.String()); err != nil {
			return nil, fmt.Errorf("state: %s: %w", s.opts.Path, err)
		}
	default:
		return nil, fmt.Errorf("state: %s: unknown format %q", s.opts.Path, f)
	}
	st := New()
	if err := json.Unmarshal(raw, st); err != nil {
		return nil, fmt.Errorf("state: %s: decode: %w", s.opts.Path, err)
	}
	if st.Version > SchemaVersion {
		return nil, fmt.Errorf("state: %s: schema version %d is newer than this allocator's %d", s.opts.Path, st.Version, SchemaVersion)
	}
	st.init()
	s.loaded, s.meta, s.slot, s.chunks = true, meta.ModifyIndex, slot, chunks
	return st, nil
}

// Save writes st with check-and-set against what this Store last loaded or
// saved. ErrConflict (wrapped) means someone else wrote in between; nothing
// this Store points at was changed by the failed Save.
func (s *Store) Save(ctx context.Context, st *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		return ErrNotLoaded
	}
	st.Version = SchemaVersion
	st.SavedAt = time.Now().UTC()
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("state: encode: %w", err)
	}

	meta := &api.Variable{Namespace: s.opts.Namespace, Path: s.opts.Path, ModifyIndex: s.meta, Items: api.VariableItems{}}
	newSlot := ""
	if len(raw) <= s.opts.InlineLimit {
		meta.Items["format"] = "inline"
		meta.Items["state"] = string(raw)
	} else {
		text, err := encodeChunked(raw)
		if err != nil {
			return err
		}
		n := (len(text) + s.opts.ChunkSize - 1) / s.opts.ChunkSize
		if n > maxChunks {
			return fmt.Errorf("state: %d bytes compressed is too large for %d chunks", len(text), maxChunks)
		}
		newSlot = "a"
		if s.slot == "a" {
			newSlot = "b"
		}
		// Write the slot nobody reads; each chunk with CAS, so a second
		// writer fails here already.
		for i := 0; i < n; i++ {
			end := min((i+1)*s.opts.ChunkSize, len(text))
			p := s.chunkPath(newSlot, i)
			v := &api.Variable{Namespace: s.opts.Namespace, Path: p, ModifyIndex: s.chunks[p],
				Items: api.VariableItems{"data": text[i*s.opts.ChunkSize : end]}}
			out, _, err := s.vars.CheckedUpdate(v, s.wo(ctx))
			if err != nil {
				return wrapCAS(p, err)
			}
			s.chunks[p] = out.ModifyIndex
		}
		sum := sha256.Sum256([]byte(text))
		meta.Items["format"] = "chunked"
		meta.Items["slot"] = newSlot
		meta.Items["chunks"] = strconv.Itoa(n)
		meta.Items["sha256"] = hex.EncodeToString(sum[:])
		meta.Items["bytes"] = strconv.Itoa(len(raw))
	}
	meta.Items["round"] = strconv.FormatInt(st.Round, 10) // for humans: nomad var get
	// The commit point.
	out, _, err := s.vars.CheckedUpdate(meta, s.wo(ctx))
	if err != nil {
		return wrapCAS(s.opts.Path, err)
	}
	s.meta, s.slot = out.ModifyIndex, newSlot
	return nil
}

func wrapCAS(path string, err error) error {
	var cas api.ErrCASConflict
	if errors.As(err, &cas) {
		return fmt.Errorf("%w: %s: expected modify index %d, found %d", ErrConflict, path, cas.CheckIndex, cas.Conflict.ModifyIndex)
	}
	return fmt.Errorf("state: write %s: %w", path, err)
}

func encodeChunked(raw []byte) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func decodeChunked(text string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("decode chunks: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decode chunks: %w", err)
	}
	// Bound the inflated size against a corrupt or hostile input.
	raw, err := io.ReadAll(io.LimitReader(zr, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("decode chunks: %w", err)
	}
	return raw, nil
}
