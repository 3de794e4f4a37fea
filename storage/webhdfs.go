package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/colinmarc/hdfs/v2/hadoopconf"
	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/spnego"
)

// defaultNameNodeHTTPPort is Hadoop 3's default NameNode HTTP port.
const defaultNameNodeHTTPPort = "9870"

// webHDFS calls a NameNode's WebHDFS REST API (/webhdfs/v1) as a Kerberos
// principal (SPNEGO) or with a delegation token (a query parameter): how
// the client obtains, renews and cancels tokens. hdfs:// itself goes to
// the RPC port, with a token too (third_party/hdfs).
type webHDFS struct {
	base  string // http://host:port
	http  *http.Client
	krb   *krbclient.Client // SPNEGO login; nil with a token
	spn   string            // HTTP/host, without realm
	token string            // delegation token (Hadoop URL string); "" with SPNEGO
}

// webHDFSAddress is the NameNode's HTTP address for an RPC address:
// dfs.namenode.http-address when the configuration names the same host,
// else the RPC host on port 9870.
func webHDFSAddress(rpcAddr string, hc hadoopconf.HadoopConf) string {
	host, _, err := net.SplitHostPort(rpcAddr)
	if err != nil {
		host = rpcAddr
	}
	if a := hc["dfs.namenode.http-address"]; a != "" {
		if h, _, err := net.SplitHostPort(a); err == nil && (h == host || h == "0.0.0.0") {
			_, port, _ := net.SplitHostPort(a)
			return net.JoinHostPort(host, port)
		}
	}
	return net.JoinHostPort(host, defaultNameNodeHTTPPort)
}

// webHDFSPrincipal is the SPNEGO service principal of the NameNode's HTTP
// server: dfs.web.authentication.kerberos.principal with _HOST replaced
// and the realm dropped, else HTTP/host.
func webHDFSPrincipal(httpAddr string, hc hadoopconf.HadoopConf) string {
	host, _, _ := net.SplitHostPort(httpAddr)
	spn := hc["dfs.web.authentication.kerberos.principal"]
	if spn == "" {
		return "HTTP/" + host
	}
	spn, _, _ = strings.Cut(spn, "@")
	return strings.Replace(spn, "_HOST", host, 1)
}

// remoteException is WebHDFS's error body.
type remoteException struct {
	RemoteException struct {
		Exception string `json:"exception"`
		Message   string `json:"message"`
	} `json:"RemoteException"`
}

// call does one WebHDFS operation on p and decodes a JSON answer into out
// (when not nil). A redirect is followed for GET only (OPEN goes to a
// DataNode); the caller closes nothing: call reads the whole body.
func (w *webHDFS) call(ctx context.Context, method, p, op string, q url.Values, out any) error {
	resp, err := w.send(ctx, method, w.url(p, op, q), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("WebHDFS %s %s: decoding the answer: %w", op, p, err)
	}
	return nil
}

func (w *webHDFS) url(p, op string, q url.Values) string {
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	v.Set("op", op)
	if w.token != "" {
		v.Set("delegation", w.token)
	}
	return w.base + "/webhdfs/v1" + (&url.URL{Path: p}).EscapedPath() + "?" + v.Encode()
}

// send sends a request (with SPNEGO when logged in) and turns an error
// status into an error wrapping the matching sentinel.
func (w *webHDFS) send(ctx context.Context, method, u string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if method == http.MethodPut || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if w.krb != nil {
		if err := spnego.SetSPNEGOHeader(w.krb, req, w.spn); err != nil {
			return nil, fmt.Errorf("%w: WebHDFS %s: SPNEGO as %s for %s: %w", ErrPermission, w.base, w.krb.Credentials.CName().PrincipalNameString(), w.spn, err)
		}
	}
	resp, err := w.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = redactURL(ue.URL) // it holds the delegation token
		}
		return nil, &webError{kind: ErrUnavailable, msg: fmt.Sprintf("WebHDFS %s: %v", w.base, err)}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var re remoteException
	_ = json.Unmarshal(b, &re)
	msg := re.RemoteException.Exception + ": " + re.RemoteException.Message
	if re.RemoteException.Exception == "" {
		msg = strings.TrimSpace(string(b))
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
	}
	kind := error(nil)
	switch {
	case re.RemoteException.Exception == "FileNotFoundException" || resp.StatusCode == http.StatusNotFound:
		kind = ErrNotFound
	case re.RemoteException.Exception == "FileAlreadyExistsException":
		kind = ErrExist
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden ||
		strings.Contains(re.RemoteException.Exception, "AccessControl") || strings.Contains(re.RemoteException.Exception, "Token") ||
		re.RemoteException.Exception == "SecurityException":
		kind = ErrPermission
	case resp.StatusCode >= 500 && re.RemoteException.Exception == "":
		kind = ErrUnavailable
	}
	return nil, &webError{kind: kind, msg: fmt.Sprintf("WebHDFS %s: HTTP %d: %s", w.base, resp.StatusCode, msg)}
}

// webError is an error answer of WebHDFS: errors.Is matches its sentinel
// (kind, nil for none), which its message does not repeat, so that callers
// can put the operation and URI before it.
type webError struct {
	kind error
	msg  string
}

func (e *webError) Error() string        { return e.msg }
func (e *webError) Is(target error) bool { return e.kind != nil && target == e.kind }

// wrapWeb is wrapErr for errors from webHDFS: "<sentinel>: op uri: cause".
func wrapWeb(op, uri string, err error) error {
	var we *webError
	if errors.As(err, &we) && we.kind != nil {
		return fmt.Errorf("%w: %s %s: %w", we.kind, op, uri, err)
	}
	return wrapErr(op, uri, err)
}

// newWebHDFSClient is the HTTP client of WebHDFS calls: each connect and
// each wait for response headers bounded by the options' timeouts.
func newWebHDFSClient(opts Options) *http.Client {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: max(opts.IOTimeout, 60*time.Second),
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{Transport: tr}
}

// redactURL hides the token parameters of a WebHDFS URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	for _, k := range []string{"delegation", "token"} {
		if q.Has(k) {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
