// Package wire is the coordinator's protocol: HTTP paths with JSON bodies,
// their messages, replies and stable error codes, and the codec of them.
//
// Four POST endpoints, /v1/acquire, /v1/renew, /v1/release and /v1/inspect,
// take and answer the plain-data requests, grants and outcomes of package
// lease (requestId, resource, holderId, sentAt {millis, domain}, kind,
// fence, ttlMillis, coordinatorExpiresAt, ok, grant, heldBy,
// retryAfterMillis, reason), plus a secret the holder chose for each
// acquisition. DecodeMessage reads a request strictly and EncodeMessage
// writes one; an Error is a refusal as it is answered, with its code. The
// state machine refuses a call with a Refusal, which names its Reason
// only: package service/httpapi, which serves the protocol, gives it its
// code and status. Package service/client calls the protocol.
package wire
