package workers

import "hash/maphash"

// keySeed is fixed for the life of the process and random per process: keys are stable
// within one router (which is all sharding needs) while a client that picks its own
// session ids cannot aim them all at one shard.
var keySeed = maphash.MakeSeed()

// KeyOf hashes a session id to a dispatch key. It does not allocate.
func KeyOf(sessionID []byte) uint64 { return maphash.Bytes(keySeed, sessionID) }

// KeyOfString is KeyOf for a string; KeyOfString(s) == KeyOf([]byte(s)).
func KeyOfString(sessionID string) uint64 { return maphash.String(keySeed, sessionID) }
