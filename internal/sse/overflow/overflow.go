// Package overflow is the one definition of the frame that ends an event
// stream whose reader fell behind its buffer: the coordinator's watch
// (service/wire re-exports it), fence-proxy's refusal stream and the
// console's relay of it. It imports nothing, so that service/wire (built
// for GOOS=js, and read by core/sim) and gates/httpfence may both use it.
// wasm/js/service/sse.mjs names the event for JavaScript (OVERFLOW); this
// package's test checks the two agree.
package overflow

// Event is the frame's event type.
const Event = "overflow"

// Frame is the frame's data: resume after ResumeFrom, the last sequence
// number the stream sent.
type Frame struct {
	ResumeFrom uint64 `json:"resumeFrom"`
}
