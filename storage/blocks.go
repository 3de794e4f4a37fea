package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// BlockLocation is where one block of a file is stored (Hadoop's
// BlockLocation).
type BlockLocation struct {
	// Offset and Length are the block's byte range in the file.
	Offset, Length int64
	// Hosts hold a replica: the DataNodes' host names as they registered
	// with the NameNode (dfs.datanode.hostname, else their address).
	Hosts []string
}

// BlockLocator is implemented by the file systems that store files in
// blocks on hosts (hdfs://), so that file sources can prefer a reader on
// a block's host (locality).
type BlockLocator interface {
	// BlockLocations returns the blocks of file p that overlap the byte
	// range [start, start+length), in file order. It blocks on one
	// NameNode call (bounded by ctx and the options' timeouts); safe for
	// concurrent use; read-only, so callers may retry it.
	BlockLocations(ctx context.Context, p string, start, length int64) ([]BlockLocation, error)
}

// blockLocations is WebHDFS's GETFILEBLOCKLOCATIONS answer (Hadoop 3.2+:
// an array of FileSystem#getFileBlockLocations's BlockLocation).
type blockLocations struct {
	BlockLocations struct {
		BlockLocation []struct {
			Offset int64    `json:"offset"`
			Length int64    `json:"length"`
			Hosts  []string `json:"hosts"`
		} `json:"BlockLocation"`
	} `json:"BlockLocations"`
}

// blockLocations asks the NameNode for the blocks of hp over WebHDFS:
// colinmarc/hdfs keeps its getBlockLocations call private.
func (w *webHDFS) blockLocations(ctx context.Context, hp string, start, length int64, q url.Values) ([]BlockLocation, error) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("offset", strconv.FormatInt(start, 10))
	q.Set("length", strconv.FormatInt(length, 10))
	var out blockLocations
	if err := w.call(ctx, "GET", hp, "GETFILEBLOCKLOCATIONS", q, &out); err != nil {
		return nil, err
	}
	bls := make([]BlockLocation, 0, len(out.BlockLocations.BlockLocation))
	for _, b := range out.BlockLocations.BlockLocation {
		bls = append(bls, BlockLocation{Offset: b.Offset, Length: b.Length, Hosts: b.Hosts})
	}
	return bls, nil
}

// BlockLocations implements BlockLocator over the NameNodes' WebHDFS
// (SPNEGO with the file system's Kerberos login, else its delegation
// token, else user.name): the first NameNode that answers (an HA standby
// refuses reads).
func (f *hdfsFS) BlockLocations(ctx context.Context, p string, start, length int64) ([]BlockLocation, error) {
	hp, err := f.check(ctx, "block locations", p)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, nn := range f.nameNodes {
		httpAddr := webHDFSAddress(nn, f.hc)
		w := &webHDFS{base: "http://" + httpAddr, http: f.webHTTP()}
		q := url.Values{}
		switch {
		case f.krb != nil:
			w.krb, w.spn = f.krb, webHDFSPrincipal(httpAddr, f.hc)
		case f.token != "":
			w.token = f.token
		default:
			q.Set("user.name", f.client.User())
		}
		bls, err := w.blockLocations(ctx, hp, start, length, q)
		if err == nil {
			return bls, nil
		}
		if errors.Is(err, ErrNotFound) {
			return nil, wrapWeb("block locations", f.URI(p), err)
		}
		errs = append(errs, fmt.Errorf("NameNode %s: %w", nn, err))
	}
	return nil, wrapWeb("block locations", f.URI(p), errors.Join(errs...))
}

// webHTTP is the HTTP client of the file system's WebHDFS calls, made on
// first use and closed with the file system.
func (f *hdfsFS) webHTTP() *http.Client {
	f.webOnce.Do(func() { f.web = newWebHDFSClient(f.opts) })
	return f.web
}

var _ BlockLocator = (*hdfsFS)(nil)
