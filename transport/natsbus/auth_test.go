package natsbus

// Tests of the embedded server's safe defaults: listeners require credentials and take
// TLS; JetStream streams and buckets are bounded; a session's events are purged.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// dialAuth connects to the bus's client port with opts, and closes the connection at
// cleanup when it opened.
func dialAuth(t *testing.T, b *Bus, opts ...nats.Option) error {
	t.Helper()
	opts = append(opts, nats.MaxReconnects(0), nats.Timeout(10*time.Second))
	nc, err := nats.Connect(b.ClientURL(), opts...)
	if err == nil {
		t.Cleanup(nc.Close)
		// The server answered CONNECT: a round trip proves the session is usable.
		err = nc.Flush()
	}
	return err
}

func TestListenersRequireCredentials(t *testing.T) {
	checkValidate(t, []validateCase{
		{"listen without credentials", Config{Listen: "127.0.0.1:0"}, "set nats.user and nats.password, or nats.token, or nats.nkeys"},
		{"user without password", Config{Listen: "127.0.0.1:0", User: "u"}, "nats.user and nats.password go together"},
		{"token and user", Config{Listen: "127.0.0.1:0", Token: "t", User: "u", Password: "p"}, "nats.token excludes"},
		{"cert without key", Config{Listen: "127.0.0.1:0", Token: "t", TLS: TLSConfig{Cert: "c.pem"}}, "cert and key go together"},
		{"cluster without client listener", Config{Cluster: ClusterConfig{Listen: "127.0.0.1:0", User: "r", Password: "p"}}, "needs nats.listen"},
		{"cluster without credentials", Config{Listen: "127.0.0.1:0", Token: "t", Cluster: ClusterConfig{Listen: "127.0.0.1:0"}}, "set nats.cluster.user and nats.cluster.password"},
		{"cluster tls without ca", Config{Listen: "127.0.0.1:0", Token: "t", Cluster: ClusterConfig{Listen: "127.0.0.1:0", User: "r", Password: "p", TLS: TLSConfig{Cert: "c", Key: "k"}}}, "set cert, key and ca together"},
		{"negative limit", Config{JetStream: JetStreamConfig{MaxBytes: -1}}, "must not be negative"},
		{"listen with token", Config{Listen: "127.0.0.1:0", Token: "t"}, ""},
		{"listen with nkeys", Config{Listen: "127.0.0.1:0", NKeys: []string{"UABC"}}, ""},
		{"no listener", Config{}, ""},
	})
	if _, err := Start(Config{Listen: "127.0.0.1:0"}, quietLog); err == nil {
		t.Fatal("Start with an open listener and no credentials succeeded")
	}
}

func TestEmbeddedServerRefusesUnauthenticated(t *testing.T) {
	b := startBus(t, Config{Listen: "127.0.0.1:0", User: "peer", Password: "s3cret", NoJetStream: true})
	if err := dialAuth(t, b); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect without credentials: %v, want an authorization error", err)
	}
	if err := dialAuth(t, b, nats.UserInfo("peer", "wrong")); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect with a wrong password: %v, want an authorization error", err)
	}
	if err := dialAuth(t, b, nats.UserInfo("peer", "s3cret")); err != nil {
		t.Fatalf("connect with the credentials: %v", err)
	}
	// The router's own in-process connection authenticated too.
	if err := b.NC.Publish(b.Subject("probe"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.NC.Flush(); err != nil {
		t.Fatalf("the router's own connection: %v", err)
	}
}

func TestEmbeddedServerToken(t *testing.T) {
	b := startBus(t, Config{Listen: "127.0.0.1:0", Token: "tok-123", NoJetStream: true})
	if err := dialAuth(t, b); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect without the token: %v, want an authorization error", err)
	}
	if err := dialAuth(t, b, nats.Token("tok-123")); err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	if !b.NC.IsConnected() {
		t.Fatal("the router's own connection is down")
	}
}

func TestEmbeddedServerNKeys(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBus(t, Config{Listen: "127.0.0.1:0", NKeys: []string{pub}, NoJetStream: true})
	if err := dialAuth(t, b); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect without the nkey: %v, want an authorization error", err)
	}
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := dialAuth(t, b, opt); err != nil {
		t.Fatalf("connect with the nkey: %v", err)
	}
	if !b.NC.IsConnected() {
		t.Fatal("the router's own connection is down")
	}
}

// testPKI writes a CA and a certificate it signed for 127.0.0.1 (server and client
// use) into dir, and returns the file names.
func testPKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcprouter test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

func TestEmbeddedServerTLS(t *testing.T) {
	ca, cert, key := testPKI(t, t.TempDir())
	t.Run("server", func(t *testing.T) {
		b := startBus(t, Config{Listen: "127.0.0.1:0", Token: "tok", NoJetStream: true, TLS: TLSConfig{Cert: cert, Key: key}})
		if err := dialAuth(t, b, nats.Token("tok")); err == nil {
			t.Fatal("a plain-text client connected to a TLS listener")
		}
		if err := dialAuth(t, b, nats.Token("tok"), nats.RootCAs(ca)); err != nil {
			t.Fatalf("connect over TLS: %v", err)
		}
		if err := dialAuth(t, b, nats.RootCAs(ca)); !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("TLS without the token: %v, want an authorization error", err)
		}
	})
	t.Run("mutual", func(t *testing.T) {
		b := startBus(t, Config{Listen: "127.0.0.1:0", Token: "tok", NoJetStream: true, TLS: TLSConfig{Cert: cert, Key: key, CA: ca}})
		if err := dialAuth(t, b, nats.Token("tok"), nats.RootCAs(ca)); err == nil {
			t.Fatal("a client without a certificate connected to a mutual-TLS listener")
		}
		if err := dialAuth(t, b, nats.Token("tok"), nats.RootCAs(ca), nats.ClientCert(cert, key)); err != nil {
			t.Fatalf("connect with a client certificate: %v", err)
		}
	})
}

// TestClusterRoutesAuthenticate joins two embedded servers whose routes require
// credentials and TLS, and checks a message crosses.
func TestClusterRoutesAuthenticate(t *testing.T) {
	ca, cert, key := testPKI(t, t.TempDir())
	tls := TLSConfig{Cert: cert, Key: key, CA: ca}
	first := startBus(t, Config{Name: "a", Listen: "127.0.0.1:0", Token: "t", NoJetStream: true, Cluster: ClusterConfig{Listen: "127.0.0.1:0", User: "route", Password: "rp", TLS: tls}})
	routeURL := fmt.Sprintf("nats-route://127.0.0.1:%d", first.Server.ClusterAddr().Port)
	second := startBus(t, Config{Name: "b", Listen: "127.0.0.1:0", Token: "t", NoJetStream: true, Cluster: ClusterConfig{Listen: "127.0.0.1:0", User: "route", Password: "rp", TLS: tls, Routes: []string{routeURL}}})
	sub, err := first.NC.SubscribeSync(first.Subject("x"))
	if err != nil {
		t.Fatal(err)
	}
	first.NC.Flush()
	// Interest propagates over the route once it is up: publish until it arrives.
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		second.NC.Publish(second.Subject("x"), []byte("hi"))
		if m, err := sub.NextMsg(100 * time.Millisecond); err == nil && string(m.Data) == "hi" {
			return
		}
	}
	t.Fatalf("no message crossed the route (routes: %d)", first.Server.NumRoutes())
}

func TestJetStreamLimits(t *testing.T) {
	const maxBytes, maxMsg = 64 << 10, 8 << 10
	b := startBus(t, Config{JetStream: JetStreamConfig{MaxMemory: 32 << 20, MaxBytes: maxBytes, MaxMsgBytes: maxMsg}})
	if got := b.Server.JetStreamConfig().MaxMemory; got != 32<<20 {
		t.Errorf("embedded server JetStream memory cap = %d, want %d", got, 32<<20)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	t.Run("bucket", func(t *testing.T) {
		kv, err := b.KeyValue(ctx, "limits", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "big", make([]byte, maxMsg+1)); err == nil {
			t.Error("a value past max_msg_bytes was stored")
		}
		// Writes past max_bytes are refused: the bucket never grows beyond it.
		refused := false
		for i := 0; i < 4*maxBytes/(maxMsg/2) && !refused; i++ {
			_, err := kv.Put(ctx, fmt.Sprintf("k%d", i), make([]byte, maxMsg/2))
			refused = err != nil
		}
		if !refused {
			t.Error("the bucket accepted four times max_bytes")
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Bytes() > maxBytes {
			t.Errorf("bucket holds %d bytes, over max_bytes %d", st.Bytes(), maxBytes)
		}
	})

	t.Run("event log", func(t *testing.T) {
		el, err := b.Events(1<<20, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// Four times max_bytes over two sessions: the oldest events go.
		for i := 0; i < 4*maxBytes/(maxMsg/2); i++ {
			el.Append(fmt.Sprintf("s%d", i%2), uint64(i/2+1), make([]byte, maxMsg/2))
		}
		el.Append("s0", 1<<30, make([]byte, maxMsg+1)) // past max_msg_bytes: refused
		waitPublished(t, b)
		info, err := el.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Bytes > maxBytes {
			t.Errorf("event log holds %d bytes, over max_bytes %d", info.State.Bytes, maxBytes)
		}
		events, err := el.Since("s0")
		if err != nil {
			t.Fatal(err)
		}
		if len(events) == 0 || events[0].Seq == 1 {
			t.Errorf("s0 kept %d events from the first: the oldest should have been evicted", len(events))
		}
		for _, e := range events {
			if len(e.Data) > maxMsg {
				t.Errorf("an event of %d bytes was kept, past max_msg_bytes", len(e.Data))
			}
		}
	})
}

func TestEventLogForget(t *testing.T) {
	b := startBus(t, Config{})
	el, err := b.Events(100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 5; i++ {
		el.Append("gone", i, []byte("event"))
		el.Append("kept", i, []byte("event"))
	}
	waitPublished(t, b)
	el.Forget("gone")
	el.Forget("not.a-valid key") // ignored, no panic
	el.waitForgotten()
	if events, err := el.Since("gone"); err != nil || len(events) != 0 {
		t.Errorf("after Forget: %d events, err %v; want none", len(events), err)
	}
	if events, err := el.Since("kept"); err != nil || len(events) != 5 {
		t.Errorf("another session: %d events, err %v; want 5", len(events), err)
	}
	if n := el.Errors.Load(); n != 0 {
		t.Errorf("%d event log errors", n)
	}
}

// waitPublished waits for the asynchronous publishes of the bus's connection.
func waitPublished(t *testing.T, b *Bus) {
	t.Helper()
	select {
	case <-b.JS.PublishAsyncComplete():
	case <-time.After(waitLimit):
		t.Fatal("asynchronous publishes not acknowledged in time")
	}
}

// Forget is called from many closing sessions at once: every purge runs, none is lost,
// whichever goroutine happens to be draining the queue.
func TestEventLogForgetConcurrent(t *testing.T) {
	b := startBus(t, Config{})
	el, err := b.Events(100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const sessions = 40
	for i := range sessions {
		el.Append("s"+strconv.Itoa(i), 1, []byte("event"))
	}
	waitPublished(t, b)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() { defer wg.Done(); el.Forget("s" + strconv.Itoa(i)) }()
	}
	wg.Wait()
	el.waitForgotten()
	for i := range sessions {
		if events, err := el.Since("s" + strconv.Itoa(i)); err != nil || len(events) != 0 {
			t.Fatalf("session %d after Forget: %d events, err %v", i, len(events), err)
		}
	}
	if n := el.Errors.Load(); n != 0 {
		t.Errorf("%d event log errors", n)
	}
}
