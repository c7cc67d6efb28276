package transport

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcprouter/mcprouter/codec"
)

// MCP over NATS, as mcprouter speaks it with backends that join as NATS services:
//
//   - the backend registers a micro service (discoverable with $SRV.PING/INFO) with two
//     endpoints: "mcp" on subject mcp.<service> in a queue group, so that new sessions
//     spread over every process of the service, and "direct" on mcp.<service>.<process>,
//     so that a session sticks to the process that initialized it;
//   - the client sends each JSON-RPC message as a request with the headers
//     Mcp-Session-Id (the session, chosen by the client) and Mcp-Reply-Subject (where the
//     backend publishes what it sends on its own: notifications, progress, requests to the
//     client); the reply is the JSON-RPC response, or empty for notifications and
//     responses; every reply carries Mcp-Direct, the process's direct subject;
//   - messages the backend publishes carry Mcp-Direct too: the client answers the
//     backend's requests there.

// NATS header names.
const (
	HeaderNATSReplySubject = "Mcp-Reply-Subject"
	HeaderNATSDirect       = "Mcp-Direct"
)

// NATSServeConfig configures ServeNATS.
type NATSServeConfig struct {
	// Service is the micro service name; the queue subject is mcp.<Service>.
	Service     string
	Version     string // default "0.0.1"
	Description string
	// MaxBatch caps the elements of one batch. Default 256.
	MaxBatch int
}

// NATSServer is a running NATS service endpoint of one Registry.
type NATSServer struct {
	svc    micro.Service
	nc     *nats.Conn
	direct string
}

// ServeNATS registers the service on nc and serves sessions of reg with h until Stop.
func ServeNATS(nc *nats.Conn, cfg NATSServeConfig, reg *Registry, h Handler) (*NATSServer, error) {
	if cfg.Service == "" {
		return nil, errors.New("transport: ServeNATS needs a service name")
	}
	if cfg.Version == "" {
		cfg.Version = "0.0.1"
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	var b [8]byte
	rand.Read(b[:])
	s := &NATSServer{nc: nc, direct: "mcp." + cfg.Service + "." + hex.EncodeToString(b[:])}
	svc, err := micro.AddService(nc, micro.Config{Name: cfg.Service, Version: cfg.Version, Description: cfg.Description})
	if err != nil {
		return nil, err
	}
	s.svc = svc
	handler := micro.HandlerFunc(func(req micro.Request) { s.handle(req, cfg, reg, h) })
	if err := svc.AddEndpoint("mcp", handler, micro.WithEndpointSubject("mcp."+cfg.Service)); err != nil {
		svc.Stop()
		return nil, err
	}
	if err := svc.AddEndpoint("direct", handler, micro.WithEndpointSubject(s.direct), micro.WithEndpointQueueGroupDisabled()); err != nil {
		svc.Stop()
		return nil, err
	}
	return s, nil
}

// Direct is this process's direct subject.
func (s *NATSServer) Direct() string { return s.direct }

// Stop deregisters the service.
func (s *NATSServer) Stop() error { return s.svc.Stop() }

func (s *NATSServer) handle(req micro.Request, cfg NATSServeConfig, reg *Registry, h Handler) {
	hdr := req.Headers()
	sid := hdr.Get(HeaderSessionID)
	reply := hdr.Get(HeaderNATSReplySubject)
	if sid == "" || reply == "" {
		req.Respond(codec.AppendError(nil, nil, codec.CodeInvalidRequest, "Mcp-Session-Id and Mcp-Reply-Subject headers are required", nil))
		return
	}
	sess, ok := reg.Get([]byte(sid))
	if !ok {
		var err error
		sess, err = reg.createWithID(sid, CarrierNATS, "", nil, &natsOut{nc: s.nc, subject: reply, direct: s.direct})
		if err != nil {
			req.Respond(codec.AppendError(nil, nil, codec.CodeInvalidRequest, "cannot open session: "+err.Error(), nil))
			return
		}
	}
	sess.touch()
	u := &natsUnit{req: req, direct: s.direct}
	batch, err := u.in.split(req.Data(), cfg.MaxBatch)
	if err != nil {
		code, msg, data := errorParts(err, nil)
		req.Respond(codec.AppendError(nil, nil, code, msg, data))
		return
	}
	u.in.scan()
	u.sess = sess
	u.dispatch(u, h, arrival{sess: sess, version: sess.Version(), carrier: CarrierNATS, batch: batch})
}

// natsUnit is one NATS request: its replies go back as the request's reply.
type natsUnit struct {
	unit
	req    micro.Request
	direct string
	once   sync.Once
}

func (u *natsUnit) finish(c *call) {
	body := c.appendBody(nil)
	u.once.Do(func() { u.req.Respond(body, micro.WithHeaders(micro.Headers{HeaderNATSDirect: {u.direct}})) })
}

func (u *natsUnit) released(*call) { u.sess.endCall() }

// natsOut publishes a NATS session's own messages to the client's reply subject.
type natsOut struct {
	nc      *nats.Conn
	subject string
	direct  string
}

func (o *natsOut) send(msg []byte) error {
	m := nats.NewMsg(o.subject)
	m.Header.Set(HeaderNATSDirect, o.direct)
	m.Data = append([]byte(nil), msg...)
	return o.nc.PublishMsg(m)
}

func (o *natsOut) close(int) {}

// createWithID registers a session whose id the client chose (NATS sessions).
func (r *Registry) createWithID(id string, carrier Carrier, version string, state SessionState, out sessionOutput) (*Session, error) {
	return r.open(sessionSpec{id: id, carrier: carrier, version: version, state: state, out: out})
}
