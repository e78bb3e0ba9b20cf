// Package torchpy finds the Python interpreter Rondo's job side (jobs/python)
// runs under in tests: one with PyTorch.
package torchpy

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Python is $RONDO_PYTHON, else Debian's /usr/bin/python3 (a pyenv python3
// on PATH may lack torch). The error, when it cannot import torch, names
// the package to install: tests fail with it rather than skip.
func Python() (string, error) {
	py := os.Getenv("RONDO_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import torch").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s cannot import torch (%v: %s): install Debian's python3-torch (scripts/deps.sh does; apt-get install python3-torch), or set RONDO_PYTHON to an interpreter with torch",
			py, err, strings.TrimSpace(string(out)))
	}
	return py, nil
}
