package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strconv"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
)

// DeniedError is returned by Client.Acquire when the resource is held by a
// live lease, the holder's own included.
type DeniedError struct {
	Resource   string
	HeldBy     string
	RetryAfter time.Duration
}

func (e *DeniedError) Error() string {
	return "client: " + strconv.Quote(e.Resource) + " is held by " + strconv.Quote(e.HeldBy) +
		" for " + e.RetryAfter.String() + " more"
}

// ErrExpired is returned by Client.Renew and Client.Release when the lease is
// no longer the resource's current lease: it ran out, was released, or was
// reassigned. An expired lease is never extended; acquire again.
var ErrExpired = errors.New("client: lease expired")

// ErrLeaseRevoked is, by errors.Is, the error of a renewal, release or
// proclamation of a lease that an operator revoked (POST /v1/revoke), and
// the cause of a Held's context whose renewal was answered so (with
// ErrLeaseLost: the cause is a *LostError with Revoked set). Renew and
// Release return an error that is both ErrLeaseRevoked and ErrExpired.
var ErrLeaseRevoked = errors.New("client: lease revoked")

// revokedError is the answer "revoked": the lease is over (ErrExpired),
// ended by a revoke (ErrLeaseRevoked).
type revokedError struct{}

func (revokedError) Error() string {
	return "client: lease revoked: an operator ended it (POST /v1/revoke); acquire again"
}

func (revokedError) Is(target error) bool { return target == ErrLeaseRevoked || target == ErrExpired }

// refusedReason is the error of a renewal, release or proclamation the
// coordinator answered with reason: revoked, or else expired.
func refusedReason(reason string) error {
	if reason == wire.ReasonRevoked {
		return revokedError{}
	}
	return ErrExpired
}

// CertificateError is the failure of a call whose coordinator's TLS
// certificate cannot be verified (an unknown CA, expired, not yet valid) or
// was not issued for the host of its base URL. It is final: sending the
// same call again would fail the same way, so the call stops at the first
// attempt. Err is crypto/tls's or crypto/x509's error.
type CertificateError struct {
	Op      wire.Op
	BaseURL string
	// NameMismatch: the certificate is valid but for other names.
	NameMismatch bool
	Err          error
}

func (e *CertificateError) Error() string {
	what := "cannot be verified"
	if e.NameMismatch {
		what = "is not for its host"
	}
	return "client: " + string(e.Op) + ": the TLS certificate of " + e.BaseURL + " " + what + " (" + e.Err.Error() +
		"); not retried: trust its CA (Config.TLS.RootCAs) or use a name it was issued for"
}

func (e *CertificateError) Unwrap() error { return e.Err }

// certificateFailure returns the certificate error in err, if it is one
// (CertificateError), and whether the name did not match.
func certificateFailure(err error) (cert error, nameMismatch bool) {
	var verr *tls.CertificateVerificationError
	var host x509.HostnameError
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &host):
		return host, true
	case errors.As(err, &verr):
		return verr.Err, false
	case errors.As(err, &unknown):
		return unknown, false
	case errors.As(err, &invalid):
		return invalid, false
	}
	return nil, false
}
