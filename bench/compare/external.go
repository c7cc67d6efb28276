package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The programs the harness does not build, measured against the router on the same
// machine in the same run: haproxy and nginx as keep-alive reverse proxies in front of
// the same mcpbackend (they know nothing of MCP: the floor of an HTTP hop), and the npm
// stdio bridges supergateway and mcp-proxy in front of `mcpbackend stdio`. Each is found
// or installed by package name; one that cannot be had is skipped with a warning, and so
// are the targets that need it.

// npmPackages are the stdio bridges, pinned so that runs on different days compare the
// same code.
var npmPackages = map[string]string{
	srvSupergateway: "supergateway@4.0.0",
	srvMCPProxy:     "mcp-proxy@6.7.19",
}

// installTimeout bounds one package installation.
const installTimeout = 5 * time.Minute

// aptProgram finds a Debian package's program (in /usr/sbin, often not on PATH), or
// installs the package with apt-get once per run.
func (h *harness) aptProgram(ctx context.Context, pkg string) (string, error) {
	find := func() (string, error) {
		if p, err := exec.LookPath(pkg); err == nil {
			return p, nil
		}
		p := filepath.Join("/usr/sbin", pkg)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	if p, err := find(); err == nil {
		return p, nil
	}
	if !h.aptTried {
		h.aptTried = true
		ictx, cancel := context.WithTimeout(ctx, installTimeout)
		defer cancel()
		argv := []string{"apt-get", "install", "-y", "--no-install-recommends", "haproxy", "nginx"}
		h.logf("installing: %s", strings.Join(argv, " "))
		if _, err := runCommand(ictx, h.o.Root, []string{"DEBIAN_FRONTEND=noninteractive"}, argv...); err != nil {
			h.aptErr = err
		}
	}
	if p, err := find(); err == nil {
		return p, nil
	}
	if h.aptErr != nil {
		return "", fmt.Errorf("%s is not installed and apt-get install failed: %v", pkg, firstLine(h.aptErr.Error()))
	}
	return "", fmt.Errorf("%s is not installed", pkg)
}

// npmDir is the directory the harness owns for its npm packages: the user's cache
// directory, so that they are installed once and not on every run.
func npmDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "mcprouter-bench", "npm"), nil
}

// npmProgram returns the command of an npm stdio bridge, installing the pinned versions
// of both into npmDir once per run when one is missing or of another version.
func (h *harness) npmProgram(ctx context.Context, server string) (string, error) {
	dir, err := npmDir()
	if err != nil {
		return "", err
	}
	spec := npmPackages[server]
	name, version, _ := strings.Cut(spec, "@")
	bin := filepath.Join(dir, "node_modules", ".bin", name)
	installed := func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil {
			return false
		}
		var pj struct{ Version string }
		if json.Unmarshal(b, &pj) != nil || pj.Version != version {
			return false
		}
		_, err = os.Stat(bin)
		return err == nil
	}
	if installed() {
		return bin, nil
	}
	if _, err := exec.LookPath("node"); err != nil {
		return "", errors.New("node is not installed")
	}
	if !h.npmTried {
		h.npmTried = true
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		ictx, cancel := context.WithTimeout(ctx, installTimeout)
		defer cancel()
		argv := []string{"npm", "install", "--no-audit", "--no-fund", "--prefix", dir}
		for _, s := range []string{srvSupergateway, srvMCPProxy} {
			argv = append(argv, npmPackages[s])
		}
		h.logf("installing: %s", strings.Join(argv, " "))
		if _, err := runCommand(ictx, dir, nil, argv...); err != nil {
			h.npmErr = err
		}
	}
	if installed() {
		return bin, nil
	}
	if h.npmErr != nil {
		return "", fmt.Errorf("%s: npm install failed: %v", spec, firstLine(h.npmErr.Error()))
	}
	return "", fmt.Errorf("%s is not installed", spec)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// freePort returns a loopback port that was free a moment ago, for the programs that
// cannot listen on port 0 and say which port they got.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts connections, at most timeout; it gives up as
// soon as p exits.
func waitListening(p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := p.exitedEarly(); err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s not accepting connections after %v; see %s", p.name, addr, timeout, p.out.path())
}

// backendHostPort is mcpbackend's listening address, from its endpoint URL.
func (h *harness) backendHostPort() (string, error) {
	u, err := url.Parse(h.urls[srvBackend])
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("mcpbackend's endpoint %q: no address", h.urls[srvBackend])
	}
	return u.Host, nil
}

// externalArgv prepares server (installs it when needed, writes its configuration) and
// returns its command line and what the report shows of it, given the port it is to
// listen on.
func (h *harness) externalArgv(ctx context.Context, server string, port int) (argv, shown []string, err error) {
	listen := "127.0.0.1:" + strconv.Itoa(port)
	switch server {
	case srvHAProxy, srvNginx:
		prog, err := h.aptProgram(ctx, server)
		if err != nil {
			return nil, nil, err
		}
		backend, err := h.backendHostPort()
		if err != nil {
			return nil, nil, err
		}
		cfg := filepath.Join(h.work, server+".conf")
		var text string
		if server == srvHAProxy {
			text = haproxyConfig(listen, backend)
			argv = []string{prog, "-db", "-f", cfg}
		} else {
			prefix := filepath.Join(h.work, "nginx")
			if err := os.MkdirAll(prefix, 0o755); err != nil {
				return nil, nil, err
			}
			text = nginxConfig(listen, backend)
			argv = []string{prog, "-p", prefix, "-e", "stderr", "-c", cfg}
		}
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			return nil, nil, err
		}
		// What the report shows names no local path: the work directory is temporary.
		shown = []string{server}
		for _, a := range argv[1 : len(argv)-1] {
			if strings.HasPrefix(a, h.work) {
				a = "WORKDIR" + strings.TrimPrefix(a, h.work)
			}
			shown = append(shown, a)
		}
		shown = append(shown, server+".conf")
		return argv, shown, nil
	case srvSupergateway, srvMCPProxy:
		prog, err := h.npmProgram(ctx, server)
		if err != nil {
			return nil, nil, err
		}
		child := filepath.Join(h.bin, binBackend)
		if server == srvSupergateway {
			// --stateful: one child per MCP session, as a session client needs (the
			// stateless mode starts a child for every request). Logging off: it logs
			// every message at its default level.
			argv = []string{prog, "--stdio", child + " stdio", "--outputTransport", "streamableHttp", "--stateful",
				"--port", strconv.Itoa(port), "--logLevel", "none"}
		} else {
			argv = []string{prog, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--server", "stream", "--", child, "stdio"}
		}
		shown = make([]string, len(argv))
		for i, a := range argv {
			shown[i] = strings.ReplaceAll(strings.ReplaceAll(a, prog, server), child, binBackend)
		}
		return argv, shown, nil
	}
	return nil, nil, fmt.Errorf("%s: not an external server", server)
}

// haproxyConfig is haproxy as a keep-alive HTTP reverse proxy: one thread (the Go servers
// get one P on their one CPU), connections to the backend kept and reused across client
// connections, no logging.
func haproxyConfig(listen, backend string) string {
	return fmt.Sprintf(`# written by bench/compare
global
  nbthread 1
  maxconn 8000
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
frontend mcp
  bind %s
  default_backend mcpbackend
backend mcpbackend
  http-reuse always
  server mcpbackend %s
`, listen, backend)
}

// nginxConfig is nginx as a keep-alive HTTP reverse proxy: one worker, an upstream
// keep-alive pool, replies passed on as they come (SSE), no access log, its temporary
// files under its own prefix.
func nginxConfig(listen, backend string) string {
	return fmt.Sprintf(`# written by bench/compare
daemon off;
worker_processes 1;
pid nginx.pid;
error_log stderr warn;
events { worker_connections 8000; }
http {
  access_log off;
  client_body_temp_path client_body;
  proxy_temp_path proxy;
  fastcgi_temp_path fastcgi;
  uwsgi_temp_path uwsgi;
  scgi_temp_path scgi;
  keepalive_requests 1000000;
  upstream mcpbackend {
    server %s;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen %s;
    location / {
      proxy_pass http://mcpbackend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
    }
  }
}
`, backend, listen)
}
