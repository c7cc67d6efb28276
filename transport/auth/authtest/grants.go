package authtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// AddClient registers a confidential client (HTTP Basic client authentication) allowed
// the client credentials and token exchange grants; its access tokens are JWTs.
func (p *Provider) AddClient(id, secret string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.clients[id] = &client{id: id, secret: secret}
}

// ClientCredentials asks the token endpoint for a client credentials token for resource
// (RFC 8707; the audience of the token, or the client itself when ""), through
// golang.org/x/oauth2/clientcredentials.
func (p *Provider) ClientCredentials(ctx context.Context, id, secret, resource string, scopes ...string) (*oauth2.Token, error) {
	cfg := clientcredentials.Config{
		ClientID:     id,
		ClientSecret: secret,
		TokenURL:     p.TokenURL(),
		Scopes:       scopes,
		AuthStyle:    oauth2.AuthStyleInHeader,
	}
	if resource != "" {
		cfg.EndpointParams = url.Values{"resource": {resource}}
	}
	return cfg.Token(ctx)
}

// Exchange runs an RFC 8693 token exchange: client id trades subjectToken (an access
// token of this provider) for an access token of the same subject for resource.
func (p *Provider) Exchange(ctx context.Context, id, secret, subjectToken, resource string, scopes ...string) (*oauth2.Token, error) {
	form := url.Values{
		"grant_type":           {string(oidc.GrantTypeTokenExchange)},
		"subject_token":        {subjectToken},
		"subject_token_type":   {string(oidc.AccessTokenType)},
		"requested_token_type": {string(oidc.AccessTokenType)},
	}
	if resource != "" {
		form.Set("resource", resource)
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("authtest: token exchange: %s: %s", resp.Status, body)
	}
	var r oidc.TokenExchangeResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("authtest: token exchange response: %w", err)
	}
	return &oauth2.Token{
		AccessToken: r.AccessToken,
		TokenType:   r.TokenType,
		Expiry:      time.Now().Add(time.Duration(r.ExpiresIn) * time.Second),
	}, nil
}
