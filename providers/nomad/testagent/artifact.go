package testagent

import (
	"context"
	"crypto/md5"  //nolint:gosec // go-getter checksum types
	"crypto/sha1" //nolint:gosec // go-getter checksum types
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// parseChecksum parses go-getter's "type:hex" checksum option.
func parseChecksum(s string) (func() hash.Hash, []byte, error) {
	typ, val, ok := strings.Cut(s, ":")
	if !ok || val == "" {
		return nil, nil, fmt.Errorf("checksum must be given as 'type:value'; got %q", s)
	}
	var h func() hash.Hash
	size := 0
	switch typ {
	case "md5":
		h, size = md5.New, md5.Size
	case "sha1":
		h, size = sha1.New, sha1.Size
	case "sha256":
		h, size = sha256.New, sha256.Size
	case "sha512":
		h, size = sha512.New, sha512.Size
	default:
		return nil, nil, fmt.Errorf("unsupported checksum type: %s", typ)
	}
	want, err := hex.DecodeString(val)
	if err != nil || len(want) != size {
		return nil, nil, fmt.Errorf("invalid %s checksum: %v", typ, val)
	}
	return h, want, nil
}

// fetchArtifact downloads one http(s) artifact into the task directory.
//
//   - mode "file": destination is the file path (default local/<basename>).
//   - mode "any"/"dir": destination is a directory (default local/) and the
//     file keeps the URL's base name. Archives are NOT unpacked (go-getter
//     would unpack .zip/.tar.gz in these modes).
//   - checksum: options.checksum or a ?checksum= URL parameter, "type:hex"
//     with md5, sha1, sha256 or sha512; a mismatch fails the download and
//     leaves no file behind.
//   - Downloaded files are left 0644, as by Nomad: a staged binary is run
//     through a shell that makes it executable first.
//
// Only http and https sources are supported; Nomad's go-getter knows more
// schemes (s3, gcs, git, hg), and none for hdfs.
func fetchArtifact(ctx context.Context, art *api.TaskArtifact, taskDir string, interp func(string) string) error {
	src := interp(*art.GetterSource)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("failed to download artifact %q: %s", src, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(src)
	if err != nil {
		return fail("%v", err)
	}
	switch u.Scheme {
	case "http", "https":
	case "":
		return fail("relative or scheme-less sources are not supported by the test agent; use an http(s) URL")
	default:
		return fail("unsupported scheme %q: the gofl Nomad test agent supports only http and https artifacts (Nomad's go-getter has no hdfs scheme; serve HDFS files over WebHDFS instead)", u.Scheme)
	}
	checksum := art.GetterOptions["checksum"]
	q := u.Query()
	if c := q.Get("checksum"); c != "" {
		checksum = c
		q.Del("checksum")
		u.RawQuery = q.Encode()
	}
	mode := "any"
	if art.GetterMode != nil {
		mode = *art.GetterMode
	}
	rel := "local/"
	if art.RelativeDest != nil {
		rel = interp(*art.RelativeDest)
	}
	if escapes(rel) {
		return fail("destination %q escapes the task directory", rel)
	}
	dest := filepath.Join(taskDir, filepath.FromSlash(rel))
	if mode != "file" {
		base := path.Base(u.Path)
		if base == "/" || base == "." || base == "" {
			base = "index.html"
		}
		dest = filepath.Join(dest, base)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o777); err != nil {
		return fail("%v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail("%v", err)
	}
	for k, v := range art.GetterHeaders {
		req.Header.Set(k, interp(v))
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fail("%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail("bad response code: %d", resp.StatusCode)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".artifact-*")
	if err != nil {
		return fail("%v", err)
	}
	defer os.Remove(tmp.Name())
	var hsh hash.Hash
	var want []byte
	if checksum != "" {
		var newHash func() hash.Hash
		newHash, want, err = parseChecksum(checksum)
		if err != nil {
			tmp.Close()
			return fail("%v", err)
		}
		hsh = newHash()
	}
	var w io.Writer = tmp
	if hsh != nil {
		w = io.MultiWriter(tmp, hsh)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		tmp.Close()
		return fail("%v", err)
	}
	if err := tmp.Close(); err != nil {
		return fail("%v", err)
	}
	if hsh != nil {
		if got := hsh.Sum(nil); !equalBytes(got, want) {
			return fail("checksums did not match for %s.\nExpected: %s\nGot: %s", rel, hex.EncodeToString(want), hex.EncodeToString(got))
		}
	}
	// Left 0644, as go-getter leaves it: Nomad never makes an artifact
	// executable.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fail("%v", err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fail("%v", err)
	}
	return nil
}

func equalBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
