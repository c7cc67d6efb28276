package app

// BackendAuthConfig is a backend's own credentials: what the router presents to the
// backend. The client's token is never passed through.
type BackendAuthConfig struct{}
