package cli

import (
	"errors"
	"fmt"
)

// Exit codes of every dractl command. They are part of the interface that
// scripts and CI pipelines rely on, so they never change meaning.
const (
	// ExitOK: the command did what was asked and every input is valid.
	ExitOK = 0
	// ExitInvalid: the inputs were read but something in them is wrong:
	// a decode, admission or pool error, an include that does not resolve,
	// or (with --strict) a flattened slice beyond a v1 limit. Also used
	// when the output cannot be written, which leaves the result unknown.
	ExitInvalid = 1
	// ExitUsage: the command line is wrong or an input cannot be read at
	// all (missing file, permission denied), so nothing was checked.
	ExitUsage = 2
)

// allocate and explain answer a question about the input instead of
// judging it, so their codes mean something else.
const (
	// ExitNoFit: allocate found no node on which the claims fit; the
	// explanation is printed.
	ExitNoFit = 1
	// ExitCannotAnswer: the input is invalid, or the allocator hit an
	// error no node can avoid (an invalid pool when no node fits, a CEL
	// runtime error), so there is no answer. Usage errors share the code.
	ExitCannotAnswer = 2
)

// exitError carries an exit code out of a cobra RunE. Its message has
// already been printed when msg is empty, which is how commands report many
// errors and then fail once.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.msg
}

// usageErrorf reports a wrong command line or an unreadable input.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

// writeError reports that the result could not be written (a closed pipe,
// a full disk): the command did not do its job, but the command line was
// fine, so it is not a usage error.
func writeError(err error) error {
	return &exitError{code: ExitInvalid, msg: fmt.Sprintf("writing output: %v", err)}
}

// invalid reports that the inputs were found invalid; the details have
// already been printed.
func invalid() error { return &exitError{code: ExitInvalid} }

// exitCode maps the error returned by a command to the process exit code.
// Errors that are not exitErrors come from cobra's own argument and flag
// parsing, so they are usage errors.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitUsage
}
