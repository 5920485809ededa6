package service

import (
	"context"
	"encoding/base64"

	"github.com/lease-fence/lease-fence/service/wire"
)

// List answers POST /v1/list: a page of the live leases under q.Prefix
// that allow accepts (nil: all), in byte order of resource, with the
// cursor of the next page. A page never holds more than q.Limit, and may
// hold fewer (even none) with a cursor: leases outside allow, and records
// that expired and are not yet swept, are skipped but take their place in
// the page. A lease live throughout a listing appears in exactly one page.
// The store must be a Lister (else 501 not_supported).
func (s *Service) List(ctx context.Context, q wire.ListRequest, allow func(string) bool) (wire.ListReply, error) {
	ls, ok := storeAs[Lister](s.store)
	if !ok {
		return wire.ListReply{}, refuse(wire.RefusedNotSupported, "this coordinator's store cannot list its leases")
	}
	after := ""
	if q.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || len(raw) == 0 {
			return wire.ListReply{}, refuse(wire.RefusedInvalidValue, `field "cursor" is not a cursor this coordinator gave`)
		}
		after = string(raw)
	}
	limit := q.Limit
	if limit <= 0 || limit > wire.MaxListLimit {
		limit = wire.MaxListLimit
	}
	live, now, next, err := ls.List(ctx, q.Prefix, after, limit)
	if err != nil {
		return wire.ListReply{}, refusal(err)
	}
	out := wire.ListReply{OK: true, Leases: make([]wire.LeaseInfo, 0, len(live))}
	if next != "" {
		out.Cursor = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	for _, e := range live {
		if allow != nil && !allow(e.Resource) {
			continue
		}
		l := wire.LeaseInfo{Resource: e.Resource, HolderID: e.HolderID, Fence: e.Fence, RemainingMillis: e.ExpiresAt - now}
		if e.Value != "" {
			v := e.Value
			l.Value = &v
		}
		out.Leases = append(out.Leases, l)
	}
	if s.w.active.Load() == 0 || len(out.Leases) == 0 {
		return out, nil
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	for i := range out.Leases {
		l := &out.Leases[i]
		qu := s.w.queues[l.Resource]
		if qu == nil {
			continue
		}
		l.Waiters = len(qu.places)
		if q.Waiters {
			for _, p := range qu.places {
				l.WaiterIDs = append(l.WaiterIDs, p.req.HolderID)
			}
		}
	}
	return out, nil
}

// WatchEvents is Watch as the HTTP handler takes it.
func (s *Service) WatchEvents(q wire.WatchRequest, caller wire.Caller, allow func(string) bool) (wire.EventStream, error) {
	w, err := s.Watch(q, caller, allow)
	if err != nil {
		return nil, err
	}
	return w, nil
}
