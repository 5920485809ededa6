// Package sim tests lease-fence under faults: a deterministic simulator in
// which one seed decides a whole run (agents, resources, message delays,
// loss, duplication and reordering, stalls, clock offsets and drift,
// coordinator restarts), a Checker that enforces the library's invariants at
// every step, and a porcupine model of a lease register for checking recorded
// histories for linearizability.
//
// Run is the function most callers want; a failing run names the invariant
// and ReplayCommand prints the command that replays it.
package sim
