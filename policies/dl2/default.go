package dl2

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
)

// defaultModel is the model Rondo ships: trained by the committed command
// in docs/dl2.md (`make dl2-model`), gzipped JSON.
//
//go:embed default-model.json.gz
var defaultModel []byte

// DefaultModel is the shipped model, validated (a fresh copy each call:
// a model is changed by use, new job types taking its spare slots).
func DefaultModel() (*Model, error) {
	z, err := gzip.NewReader(bytes.NewReader(defaultModel))
	if err != nil {
		return nil, fmt.Errorf("dl2: the shipped model: %v", err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return nil, fmt.Errorf("dl2: the shipped model: %v", err)
	}
	return ReadModel("the shipped model", bytes.NewReader(b))
}
