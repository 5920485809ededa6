package wire

// A call session is an HTTP/1.1 connection that a client turned, with an
// Upgrade, into a sequence of calls without HTTP: the client sends POST
// SessionPath with "Connection: Upgrade" and "Upgrade: " + SessionProtocol
// and no body; a server that offers sessions answers 101 Switching
// Protocols, and from then on the connection carries frames, one call and
// its answer at a time:
//
//	call:   op (1 byte, its index in SessionOps), length (4 bytes,
//	        big-endian), the body the call's POST would carry
//	answer: status (2 bytes, big-endian), length (4 bytes, big-endian),
//	        the body the POST would be answered with, with that status
//
// A server that does not offer sessions answers the upgrade as any other
// request (404 not_found from one that does not know the path), and the
// client sends its calls as requests. Calls that wait (waitMillis) are
// not sent on a session.
const (
	SessionPath     = "/v1/session"
	SessionProtocol = "lease-fence-calls/1"
)

// SessionOps are the calls a session carries, numbered by their index.
var SessionOps = [...]Op{OpAcquire, OpRenew, OpRelease, OpInspect}

// SessionOp returns the index of op in SessionOps, or -1.
func SessionOp(op Op) int {
	for i, o := range SessionOps {
		if o == op {
			return i
		}
	}
	return -1
}

// The sizes of a session's frame heads.
const (
	SessionCallHead   = 5
	SessionAnswerHead = 6
)
