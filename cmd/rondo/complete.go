package main

import (
	"flag"
	"strings"

	"github.com/posener/complete"
)

// Shell completion (hashicorp/cli's Autocomplete: `rondo
// -autocomplete-install` adds `complete -C <rondo> rondo` to the shell's
// rc file). Every command built on base completes its own flags, read
// from its flag set: file names after the flags that take a file, nothing
// after the others; its arguments as argPredictor says (files for the
// commands that read one).

// fileFlags are flag names whose value is a file or directory.
var fileFlags = map[string]bool{"config": true, "ca-cert": true, "client-cert": true, "client-key": true,
	"rondo-ca-cert": true, "rondo-client-cert": true, "rondo-client-key": true, "var-file": true, "trace": true,
	"throughputs": true, "requests": true, "topology": true, "faults": true, "vc-config": true, "dl2-model": true,
	"output": true, "out": true}

// fileArgs are the commands whose arguments are files.
var fileArgs = map[string]bool{"config validate": true, "job run": true, "policy solve": true}

// AutocompleteFlags predicts the command's flags (cli.CommandAutocomplete).
func (b *base) AutocompleteFlags() complete.Flags {
	out := complete.Flags{}
	b.flags.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "deprecated:") {
			return // an old name (aliasFlag): not offered
		}
		var p complete.Predictor = complete.PredictAnything
		switch {
		case isBoolFlag(f):
			p = complete.PredictNothing
		case fileFlags[f.Name]:
			p = complete.PredictFiles("*")
		}
		out["-"+f.Name] = p
	})
	return out
}

// AutocompleteArgs predicts the command's arguments.
func (b *base) AutocompleteArgs() complete.Predictor {
	if fileArgs[b.name] {
		return complete.PredictFiles("*")
	}
	return complete.PredictNothing
}

func isBoolFlag(f *flag.Flag) bool {
	bf, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && bf.IsBoolFlag()
}
