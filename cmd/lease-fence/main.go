//go:build unix

// Command lease-fence is the command-line tool of lease-fence: it runs a
// command under a lease (lock) or while leader (elect), shows the leases
// (ls, inspect, watch), revokes one (revoke) and makes tokens (token new).
//
//	lease-fence lock [--wait D] [--kill-after D] [--holder ID] RESOURCE -- CMD [ARGS...]
//	lease-fence elect [--value V] [--observe] NAME [-- CMD [ARGS...]]
//	lease-fence ls [--waiters] [--json] [PREFIX]
//	lease-fence inspect [--json] RESOURCE
//	lease-fence watch [--json] [PREFIX]
//	lease-fence revoke [--holder H] [--fence F] [--json] RESOURCE
//	lease-fence token new NAME --resources P [--resources P...] [--holders P...] [--admin] [--max-leases N]
//
// The coordinator's URL comes from LEASE_FENCE_URL (a comma list for
// replicas) or --url, its token from the file LEASE_FENCE_TOKEN_FILE or
// --token-file names; --ca, --cert and --key configure TLS. Results go to
// stdout (a table, or JSON with --json), diagnostics to stderr. The exit
// codes are in docs/cli.md; usage errors exit 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes (docs/cli.md). lock and elect with a command exit with the
// command's own status otherwise.
const (
	exitOK    = 0
	exitError = 1 // the coordinator refused the call (not_held, invalid_value, ...)
	exitUsage = 2 // bad flags or arguments, no URL, a file that cannot be read
	// exitNotObtained: lock did not get the lease within --wait (flock -E,
	// sysexits' EX_TEMPFAIL: try again later).
	exitNotObtained = 75
	// exitLost: the lease (or the lead) was lost while the command ran;
	// the command was ended.
	exitLost = 76
	// exitConn: the coordinator could not be reached, was unavailable
	// (5xx), refused the token (401, 403) or its certificate.
	exitConn = 77
	// exitNoCommand and exitCannotRun: the command was not found, or found
	// but could not be run, as shells and env(1) say.
	exitCannotRun = 126
	exitNoCommand = 127
)

const usage = `usage: lease-fence COMMAND [FLAGS] [ARGS]

  lock [--wait D] [--kill-after D] [--holder ID] [--renew-every D] RESOURCE -- CMD [ARGS...]
                 run CMD while holding the lease on RESOURCE
  elect [--value V] [--holder ID] [--observe] [--json] [--kill-after D] NAME [-- CMD [ARGS...]]
                 campaign and print each leader, or run CMD while leader
  ls [--waiters] [--json] [PREFIX]        list the live leases under PREFIX
  inspect [--json] RESOURCE               show who holds RESOURCE
  watch [--json] [--stream ID --after-seq N] [PREFIX]
                                          follow the events under PREFIX
  revoke [--holder H] [--fence F] [--json] RESOURCE
                                          end a lease, or remove a waiter
  token new NAME --resources P [--resources P...] [--holders P...] [--admin] [--max-leases N]
                                          make a token and its tokens.json entry

Connection (every command but token): --url or LEASE_FENCE_URL (a comma list
for replicas), --token-file or LEASE_FENCE_TOKEN_FILE, --ca, --cert, --key.
'lease-fence COMMAND -h' lists a command's flags; docs/cli.md has the exit codes.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// stdio is what a command reads and writes: its standard streams and
// environment.
type stdio struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	lines          map[*flag.FlagSet]string // each subcommand's usage line
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	s := &stdio{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "lock":
		return s.lock(ctx, args[1:])
	case "elect":
		return s.elect(ctx, args[1:])
	case "ls":
		return s.ls(ctx, args[1:])
	case "inspect":
		return s.inspect(ctx, args[1:])
	case "watch":
		return s.watch(ctx, args[1:])
	case "revoke":
		return s.revoke(ctx, args[1:])
	case "token":
		if len(args) >= 2 && args[1] == "new" {
			return s.tokenNew(args[2:])
		}
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "lease-fence: unknown command %q\n", strings.Join(args[:min(len(args), 2)], " "))
	fmt.Fprint(stderr, usage)
	return exitUsage
}

// usageError is a mistake in the command line: exit 2, with the command's
// usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// newFlags returns the flag set of a subcommand whose usage line is line.
func (s *stdio) newFlags(name, line string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	fs.Usage = func() {
		fmt.Fprintf(s.stderr, "usage: lease-fence %s\n", line)
		fs.PrintDefaults()
	}
	if s.lines == nil {
		s.lines = map[*flag.FlagSet]string{}
	}
	s.lines[fs] = line
	return fs
}

// parse reads args into fs: flags and operands may be mixed, as in
// "ls jobs/ --waiters". Everything after "--" is the command (cmd). With
// stopAt > 0, the operand after the first stopAt ones starts the command
// too (lock RESOURCE CMD ARGS..., as flock and etcdctl lock take it), and
// flags after it are the command's. -h asks for usage: errHelp.
func parse(fs *flag.FlagSet, args []string, stopAt int) (operands, cmd []string, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		rest := fs.Args()
		// flag.Parse stops at "--" (consumed) or at the first operand.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return operands, rest, nil
		}
		if len(rest) == 0 {
			return operands, nil, nil
		}
		if stopAt > 0 && len(operands) == stopAt {
			return operands, rest, nil
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

// fail prints err on stderr and returns its exit code: usage for a
// *usageError (with the usage line of fs, if any), else as exitCode says.
func (s *stdio) fail(fs *flag.FlagSet, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(s.stderr, "lease-fence:", ue.msg)
		if fs != nil {
			fmt.Fprintf(s.stderr, "usage: lease-fence %s\n", s.lines[fs])
		}
		return exitUsage
	}
	fmt.Fprintln(s.stderr, "lease-fence:", describe(err))
	return exitCode(err)
}

// parseFailed is the exit code of a flag set that refused its arguments
// (flag has printed why, and the usage): 0 for -h, else 2.
func parseFailed(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}
