package authtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// store is the provider's state: the example storage of zitadel/oidc for everything this
// fixture does not use (authorization code, device flow), with its own clients (JWT access
// tokens, client credentials and token exchange), keys (rotation) and token claims
// (scope, audience from RFC 8707 resource).
type store struct {
	*storage.Storage
	ttl time.Duration

	mu      sync.Mutex
	clients map[string]*client
	signing *key
	keys    []*key // published in the JWKS, signing key included
}

var (
	_ op.Storage                  = (*store)(nil)
	_ op.ClientCredentialsStorage = (*store)(nil)
	_ op.TokenExchangeStorage     = (*store)(nil)
)

func newStore(issuer string, ttl time.Duration, first *key) *store {
	return &store{
		Storage: storage.NewStorageWithClients(storage.NewUserStore(issuer), map[string]*storage.Client{}),
		ttl:     ttl,
		clients: map[string]*client{},
		signing: first,
		keys:    []*key{first},
	}
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signing, nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var algs []jose.SignatureAlgorithm
	for _, k := range s.keys {
		algs = append(algs, k.alg)
	}
	return algs, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		out[i] = publicKey{k}
	}
	return out, nil
}

func (s *store) client(id string) (*client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("client not found")
	}
	return c, nil
}

func (s *store) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	return s.client(id)
}

func (s *store) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, err := s.client(id)
	if err != nil {
		return err
	}
	if c.secret != secret {
		return errors.New("invalid secret")
	}
	return nil
}

func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.client(id)
}

// ClientCredentialsTokenRequest: the client is the subject; the audience is the RFC 8707
// resource of the request, or the client itself when it names none.
func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	aud := resources(ctx)
	if len(aud) == 0 {
		aud = []string{id}
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: aud, Scopes: scopes}, nil
}

func (s *store) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return uuid.NewString(), time.Now().Add(s.ttl), nil
}

// scopeClaims puts the granted scopes in the access token (op leaves that to storage).
func scopeClaims(scopes []string) map[string]any {
	if len(scopes) == 0 {
		return nil
	}
	return map[string]any{"scope": strings.Join(scopes, " ")}
}

func (s *store) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	return scopeClaims(scopes), nil
}

// ValidateTokenExchangeRequest grants an access token (not the example's refresh token)
// for the subject of the subject token, with the scopes asked for.
func (s *store) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	if req.GetRequestedTokenType() == "" {
		req.SetRequestedTokenType(oidc.AccessTokenType)
	}
	if req.GetRequestedTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("authtest issues access tokens only")
	}
	req.SetCurrentScopes(req.GetScopes())
	return nil
}

func (s *store) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest: the scopes, and the client that exchanged as
// the actor (RFC 8693 act), so a backend can tell whose token it holds and who asked.
func (s *store) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	c := scopeClaims(req.GetScopes())
	if c == nil {
		c = map[string]any{}
	}
	c["act"] = map[string]any{"sub": req.GetClientID()}
	return c, nil
}

func (s *store) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return nil
}

// client is a confidential client of this provider: client credentials and token
// exchange, JWT access tokens.
type client struct {
	id, secret string
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return nil }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType  { return nil }
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials, oidc.GrantTypeTokenExchange}
}
func (c *client) LoginURL(string) string              { return "" }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration      { return time.Hour }
func (c *client) DevMode() bool                       { return true }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
