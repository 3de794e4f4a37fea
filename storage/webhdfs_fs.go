package storage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"sync"
	"time"
)

// webhdfsFS is hdfs:// for a process that holds a delegation token and no
// Kerberos credentials (a TaskManager or job runner of a cluster whose
// client shipped tokens): the same FileSystem over the NameNode's WebHDFS
// API with the token, because colinmarc/hdfs cannot present a token on the
// RPC port (see webHDFS).
type webhdfsFS struct {
	w         *webHDFS
	authority string
}

// openHDFSFS opens hdfs:// with a delegation token when opts name a token
// file and no Kerberos credentials, else over the NameNode RPC.
func openHDFSFS(ctx context.Context, u *url.URL, opts Options) (FileSystem, error) {
	if opts.DelegationTokenFile == "" || opts.Kerberos.Keytab != "" || opts.Kerberos.UseTicketCache {
		f, err := openHDFS(ctx, u, opts)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	hc, confDir, err := loadHadoopConf(opts)
	if err != nil {
		return nil, err
	}
	addrs, err := nameNodes(u.Host, hc, confDir)
	if err != nil {
		return nil, err
	}
	tokens, err := ReadDelegationTokens(opts.DelegationTokenFile)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if t, ok := tokenFor(tokens, a); ok {
			f, err := openWebHDFSWithToken(ctx, u.Host, t, opts)
			if err != nil {
				return nil, err
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("%w: the delegation token file %s has no token for HDFS NameNode %v", ErrPermission, opts.DelegationTokenFile, addrs)
}

// openWebHDFSWithToken opens hdfs:// on nn (its RPC address) with tok and
// checks that the token is accepted (one GETFILESTATUS of /).
func openWebHDFSWithToken(ctx context.Context, authority string, tok DelegationToken, opts Options) (*webhdfsFS, error) {
	f := &webhdfsFS{
		w:         &webHDFS{base: "http://" + tok.WebHDFS, http: newWebHDFSClient(opts), token: tok.Token},
		authority: authority,
	}
	if _, err := f.Stat(ctx, "/"); err != nil {
		f.w.close()
		return nil, fmt.Errorf("storage: connecting to HDFS %s with the %s: %w", tok.NameNode, tok, err)
	}
	return f, nil
}

func (f *webhdfsFS) URI(p string) string { return "hdfs://" + f.authority + path.Clean("/"+p) }

func (f *webhdfsFS) check(ctx context.Context, op, p string) (string, error) {
	return checkPath(ctx, f, op, p)
}

// fileStatus is WebHDFS's FileStatus.
type fileStatus struct {
	PathSuffix       string `json:"pathSuffix"`
	Type             string `json:"type"`
	Length           int64  `json:"length"`
	Owner            string `json:"owner"`
	ModificationTime int64  `json:"modificationTime"`
}

func (s fileStatus) info(p string) FileInfo {
	return FileInfo{Name: path.Base(p), Path: p, Size: s.Length, ModTime: time.UnixMilli(s.ModificationTime),
		IsDir: s.Type == "DIRECTORY", Owner: s.Owner}
}

func (f *webhdfsFS) Stat(ctx context.Context, p string) (FileInfo, error) {
	hp, err := f.check(ctx, "stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	var out struct {
		FileStatus fileStatus `json:"FileStatus"`
	}
	if err := f.w.call(ctx, "GET", hp, "GETFILESTATUS", nil, &out); err != nil {
		return FileInfo{}, wrapWeb("stat", f.URI(p), err)
	}
	return out.FileStatus.info(hp), nil
}

func (f *webhdfsFS) ReadDir(ctx context.Context, p string) ([]FileInfo, error) {
	hp, err := f.check(ctx, "readdir", p)
	if err != nil {
		return nil, err
	}
	var out struct {
		FileStatuses struct {
			FileStatus []fileStatus `json:"FileStatus"`
		} `json:"FileStatuses"`
	}
	if err := f.w.call(ctx, "GET", hp, "LISTSTATUS", nil, &out); err != nil {
		return nil, wrapWeb("readdir", f.URI(p), err)
	}
	infos := make([]FileInfo, 0, len(out.FileStatuses.FileStatus))
	for _, s := range out.FileStatuses.FileStatus {
		if s.PathSuffix == "" { // p is a file
			return nil, fmt.Errorf("%w: readdir %s: not a directory", ErrInvalid, f.URI(p))
		}
		infos = append(infos, s.info(path.Join(hp, s.PathSuffix)))
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	return infos, nil
}

func (f *webhdfsFS) MkdirAll(ctx context.Context, p string) error {
	hp, err := f.check(ctx, "mkdir", p)
	if err != nil {
		return err
	}
	if err := f.w.call(ctx, "PUT", hp, "MKDIRS", url.Values{"permission": {"755"}}, nil); err != nil {
		return wrapWeb("mkdir", f.URI(p), err)
	}
	return nil
}

func (f *webhdfsFS) RemoveAll(ctx context.Context, p string) error {
	hp, err := f.check(ctx, "remove", p)
	if err != nil {
		return err
	}
	if hp == "/" {
		return fmt.Errorf("%w: refusing to remove %s", ErrInvalid, f.URI(p))
	}
	// DELETE of a missing path answers {"boolean": false}: not an error.
	if err := f.w.call(ctx, "DELETE", hp, "DELETE", url.Values{"recursive": {"true"}}, nil); err != nil {
		return wrapWeb("remove", f.URI(p), err)
	}
	return nil
}

func (f *webhdfsFS) Rename(ctx context.Context, from, to string) error {
	hf, err := f.check(ctx, "rename", from)
	if err != nil {
		return err
	}
	ht, err := f.check(ctx, "rename", to)
	if err != nil {
		return err
	}
	// RENAME with OVERWRITE is Hadoop's rename2: it replaces a file at to
	// and fails (FileNotFoundException) for a missing from.
	q := url.Values{"destination": {ht}, "renameoptions": {"OVERWRITE"}}
	if err := f.w.call(ctx, "PUT", hf, "RENAME", q, nil); err != nil {
		return wrapWeb("rename", f.URI(from)+" to "+f.URI(to), err)
	}
	return nil
}

func (f *webhdfsFS) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	hp, err := f.check(ctx, "open", p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat(ctx, hp)
	if err != nil {
		return nil, fmt.Errorf("storage: open: %w", err)
	}
	if st.IsDir {
		return nil, fmt.Errorf("%w: open %s: is a directory", ErrInvalid, f.URI(p))
	}
	return &webhdfsReader{fs: f, p: hp, size: st.Size}, nil
}

// webhdfsReader streams a file with OPEN (redirected to a DataNode); Seek
// reopens at the new offset on the next Read.
type webhdfsReader struct {
	fs     *webhdfsFS
	p      string
	size   int64
	off    int64
	body   io.ReadCloser
	closed bool
}

func (r *webhdfsReader) Read(b []byte) (int, error) {
	if r.closed {
		return 0, fmt.Errorf("storage: read %s: closed", r.fs.URI(r.p))
	}
	if r.off >= r.size {
		return 0, io.EOF
	}
	if r.body == nil {
		resp, err := r.fs.w.send(context.Background(), "GET", r.fs.w.url(r.p, "OPEN", url.Values{"offset": {strconv.FormatInt(r.off, 10)}}), nil)
		if err != nil {
			return 0, wrapWeb("read", r.fs.URI(r.p), err)
		}
		r.body = resp.Body
	}
	n, err := r.body.Read(b)
	r.off += int64(n)
	if err == io.EOF && r.off < r.size {
		err = fmt.Errorf("%w: read %s: the stream ended at %d of %d bytes", ErrUnavailable, r.fs.URI(r.p), r.off, r.size)
	} else if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: read %s: %w", ErrUnavailable, r.fs.URI(r.p), err)
	}
	return n, err
}

func (r *webhdfsReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return r.off, fmt.Errorf("%w: seek %s: negative offset", ErrInvalid, r.fs.URI(r.p))
	}
	if offset != r.off && r.body != nil {
		r.body.Close()
		r.body = nil
	}
	r.off = offset
	return offset, nil
}

func (r *webhdfsReader) Close() error {
	r.closed = true
	if r.body != nil {
		err := r.body.Close()
		r.body = nil
		return err
	}
	return nil
}

// Create makes the parents and an empty file (CREATE, overwrite=false:
// ErrExist if p exists), visible at once as on RPC; the writer then
// streams the data with APPEND on the first Write.
func (f *webhdfsFS) Create(ctx context.Context, p string) (io.WriteCloser, error) {
	hp, err := f.check(ctx, "create", p)
	if err != nil {
		return nil, err
	}
	if err := f.MkdirAll(ctx, path.Dir(hp)); err != nil {
		return nil, err
	}
	if err := f.twoStep(ctx, http.MethodPut, hp, "CREATE", url.Values{"overwrite": {"false"}}, http.NoBody); err != nil {
		return nil, wrapWeb("create", f.URI(p), err)
	}
	return &webhdfsWriter{fs: f, p: hp}, nil
}

// twoStep does a WebHDFS write: the NameNode names a DataNode
// (noredirect=true), which takes body.
func (f *webhdfsFS) twoStep(ctx context.Context, method, hp, op string, q url.Values, body io.Reader) error {
	q.Set("noredirect", "true")
	var loc struct {
		Location string `json:"Location"`
	}
	if err := f.w.call(ctx, method, hp, op, q, &loc); err != nil {
		return err
	}
	if loc.Location == "" {
		return fmt.Errorf("WebHDFS %s: %s named no DataNode", f.w.base, op)
	}
	resp, err := f.w.send(ctx, method, loc.Location, body)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.Body.Close()
}

// webhdfsWriter streams what is written to one APPEND request, started on
// the first Write by a goroutine it owns, which ends when Close closes
// the pipe (or the request fails).
type webhdfsWriter struct {
	fs     *webhdfsFS
	p      string
	pw     *io.PipeWriter
	done   chan error
	once   sync.Once
	result error
}

func (w *webhdfsWriter) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if w.pw == nil {
		pr, pw := io.Pipe()
		w.pw, w.done = pw, make(chan error, 1)
		go func() {
			err := w.fs.twoStep(context.Background(), http.MethodPost, w.p, "APPEND", url.Values{}, pr)
			pr.CloseWithError(err) // a failed request fails the next Write
			w.done <- err
		}()
	}
	n, err := w.pw.Write(b)
	if err != nil {
		return n, wrapWeb("write", w.fs.URI(w.p), err)
	}
	return n, nil
}

// Close ends the upload and waits for the DataNode's answer; the data is
// in the file once it returns nil. Later calls return the first's result.
func (w *webhdfsWriter) Close() error {
	w.once.Do(func() {
		if w.pw == nil {
			return
		}
		w.pw.Close()
		w.result = wrapWeb("close", w.fs.URI(w.p), <-w.done)
	})
	return w.result
}

// Close releases idle connections. Writers still open are abandoned.
func (f *webhdfsFS) Close() error {
	f.w.close()
	return nil
}

// Chmod implements Chmoder.
func (f *webhdfsFS) Chmod(ctx context.Context, p string, mode os.FileMode) error {
	hp, err := f.check(ctx, "chmod", p)
	if err != nil {
		return err
	}
	if err := f.w.call(ctx, "PUT", hp, "SETPERMISSION", url.Values{"permission": {strconv.FormatUint(uint64(mode.Perm()), 8)}}, nil); err != nil {
		return wrapWeb("chmod", f.URI(p), err)
	}
	return nil
}
