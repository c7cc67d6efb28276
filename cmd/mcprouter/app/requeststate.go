package app

import (
	"crypto/sha256"
	"errors"
	"fmt"
)

// RequestStateConfig keys the requestState the router hands to 2026-07-28 clients when
// it translates a 2025 backend's request for input (router/fleet, mrtr.go). Every
// router instance of a cluster given the same secret can verify a state another one
// sealed, and routes the client's retry to that instance over NATS; without one each
// process seals with a random key of its own, and a retry that lands on another
// instance is refused. The secret is read at start, never logged, and never written
// in the configuration itself.
type RequestStateConfig struct {
	// KeyEnv names the router's environment variable that holds the secret.
	KeyEnv string `yaml:"key_env"`
	// KeyFile is a file that holds the secret (a mounted secret).
	KeyFile string `yaml:"key_file"`
}

// minStateSecret is the shortest secret accepted: 32 characters, as many as the key's
// bytes (openssl rand -base64 32 writes 44).
const minStateSecret = 32

// validate checks that at most one source is set.
func (c RequestStateConfig) validate() error {
	if c.KeyEnv != "" && c.KeyFile != "" {
		return errors.New("request_state: set key_env or key_file, not both")
	}
	return nil
}

// key reads the secret and derives the sealing key from it (SHA-256 of a label and the
// secret: any length of secret gives the 32 bytes the sealer takes); nil when none is
// configured.
func (c RequestStateConfig) key() ([]byte, error) {
	var secret, key string
	var err error
	switch {
	case c.KeyEnv != "":
		key = "request_state.key_env"
		secret, err = env(c.KeyEnv)
	case c.KeyFile != "":
		key = "request_state.key_file"
		secret, err = readSecretFile(c.KeyFile)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if len(secret) < minStateSecret {
		return nil, fmt.Errorf("%s: the secret is shorter than %d characters", key, minStateSecret)
	}
	k := sha256.Sum256([]byte("mcprouter requestState key\x00" + secret))
	return k[:], nil
}
