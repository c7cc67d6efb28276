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
// one not acknowledged in time counts as not written (the caller writes it again).
func (s *SessionStore) SaveAll(ids []string, recs [][]byte) []error {
	errs := make([]error, len(ids))
	acks := make([]jetstream.PubAckFuture, len(ids))
	for i, id := range ids {
		if !validKey(id) {
			errs[i] = errInvalidKey
			continue
		}
		if acks[i], errs[i] = s.js.PublishAsync(s.prefix+id, recs[i]); errs[i] != nil {
			acks[i] = nil
			s.Errors.Add(1)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
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
