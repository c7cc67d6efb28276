package natsbus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// errInvalidKey is a session id the bucket cannot hold as a key.
var errInvalidKey = errors.New("nats: invalid session id")

// SaveAll writes many session records at once (router.batchStore): each is published
// to its key's subject in the bucket without waiting, so that the connection sends them
// together and the server acknowledges them together, and then every acknowledgement
// is waited for, within the store's timeout. What it writes is what Save writes (a
// record is the value of its key, as kv.Put makes it). Each record's error is reported:
// one not acknowledged in time counts as not written (the caller writes it again). The
// records of sessions this store named go into their pages, each page changed once
// and written whole. A nil record deletes its session's record (Delete), in its page's
// write when this store named it.
func (s *SessionStore) SaveAll(ids []string, recs [][]byte) []error {
	errs := make([]error, len(ids))
	acks := make([]jetstream.PubAckFuture, len(ids))
	var (
		changes map[uint32]map[entryKey][]byte
		inPage  []uint32 // by index in ids: its page + 1, 0 when it has none
	)
	for i, id := range ids {
		if n, key, ok := s.pages.mine(id); ok {
			if changes == nil {
				changes, inPage = map[uint32]map[entryKey][]byte{}, make([]uint32, len(ids))
			}
			if changes[n] == nil {
				changes[n] = make(map[entryKey][]byte, min(len(ids)-i, pageCap))
			}
			changes[n][key], inPage[i] = recs[i], n+1
			continue
		}
		if recs[i] == nil {
			s.Delete(id)
			continue
		}
		if !validKey(id) {
			errs[i] = errInvalidKey
			continue
		}
		if acks[i], errs[i] = s.js.PublishAsync(s.prefix+id, recs[i]); errs[i] != nil {
			acks[i] = nil
			s.Errors.Add(1)
		}
	}
	var writes map[uint32]*pageWrite
	if changes != nil {
		writes = s.publishPages(changes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if writes != nil {
		s.waitPages(writes)
		for i, n := range inPage {
			if n > 0 {
				errs[i] = writes[n-1].err
			}
		}
	}
	for i, ack := range acks {
		if ack == nil {
			continue
		}
		if errs[i] = waitAck(ctx, ack); errs[i] != nil {
			s.Errors.Add(1)
		}
	}
	return errs
}

// waitAck waits for a publication's acknowledgement; one that has arrived counts even
// once ctx is done.
func waitAck(ctx context.Context, ack jetstream.PubAckFuture) error {
	select {
	case <-ack.Ok():
		return nil
	case err := <-ack.Err():
		return err
	default:
	}
	select {
	case <-ack.Ok():
		return nil
	case err := <-ack.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
