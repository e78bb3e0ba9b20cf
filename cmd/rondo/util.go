package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// base carries what every command shares: its synopsis, a flag set whose
// usage is the command's help, and one-line error reporting.
type base struct {
	name     string
	synopsis string
	usage    string // text after "Usage: rondo <name> "
	flags    *flag.FlagSet
	stdout   io.Writer
	stderr   io.Writer
}

func newBase(name, synopsis, usage string) base {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return base{name: name, synopsis: synopsis, usage: usage, flags: fs, stdout: os.Stdout, stderr: os.Stderr}
}

func (b *base) Synopsis() string { return b.synopsis }

func (b *base) Help() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Usage: rondo %s %s\n\n  %s\n", b.name, b.usage, b.synopsis)
	n := 0
	b.flags.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		sb.WriteString("\nOptions:\n\n")
		b.flags.SetOutput(&sb)
		b.flags.PrintDefaults()
		b.flags.SetOutput(io.Discard)
	}
	return sb.String()
}

// parse parses args; it returns -1 when the command should go on, else the
// exit code (0 for -h, 1 for a bad flag).
func (b *base) parse(args []string) int {
	if err := b.flags.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(b.stdout, b.Help())
			return 0
		}
		return b.fail(err)
	}
	return -1
}

// fail prints a one-line error and returns exit code 1.
func (b *base) fail(err error) int {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	fmt.Fprintf(b.stderr, "rondo %s: %s\n", b.name, msg)
	return 1
}

// openInput opens a path, or stdin for "" or "-".
func openInput(path string) (io.ReadCloser, error) {
	if path == "" || path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(path)
}
