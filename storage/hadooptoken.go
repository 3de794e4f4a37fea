package storage

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// hadoopToken is a decoded Hadoop token (org.apache.hadoop.security.token.Token).
type hadoopToken struct {
	Identifier, Password []byte
	Kind, Service        string
}

// decodeHadoopToken reads Hadoop's URL-safe string form of a token
// (Token.encodeToUrlString: base64url of vint-length-prefixed identifier,
// password, kind and service).
func decodeHadoopToken(s string) (hadoopToken, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return hadoopToken{}, fmt.Errorf("%w: a delegation token is not Hadoop's base64url form: %v", ErrInvalid, err)
	}
	r := bytes.NewReader(b)
	var t hadoopToken
	var kind, service []byte
	for _, f := range []*[]byte{&t.Identifier, &t.Password, &kind, &service} {
		if *f, err = readVBytes(r); err != nil {
			return hadoopToken{}, fmt.Errorf("%w: a delegation token is malformed: %v", ErrInvalid, err)
		}
	}
	t.Kind, t.Service = string(kind), string(service)
	return t, nil
}

// tokenOwner is the owner (Hadoop's short name) in the identifier of an
// HDFS delegation token (AbstractDelegationTokenIdentifier: a version
// byte, then owner, renewer and real user as Text).
func tokenOwner(identifier []byte) (string, error) {
	r := bytes.NewReader(identifier)
	if _, err := r.ReadByte(); err != nil {
		return "", fmt.Errorf("%w: empty delegation token identifier", ErrInvalid)
	}
	owner, err := readVBytes(r)
	if err != nil || len(owner) == 0 {
		return "", fmt.Errorf("%w: delegation token identifier without an owner", ErrInvalid)
	}
	name, _, _ := strings.Cut(string(owner), "@")
	name, _, _ = strings.Cut(name, "/")
	return name, nil
}

// readVBytes reads a Hadoop vint length and that many bytes.
func readVBytes(r *bytes.Reader) ([]byte, error) {
	n, err := readVLong(r)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(r.Len()) {
		return nil, fmt.Errorf("length %d out of range", n)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// readVLong is Hadoop's WritableUtils.readVLong.
func readVLong(r *bytes.Reader) (int64, error) {
	first, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	fb := int8(first)
	if fb >= -112 {
		return int64(fb), nil
	}
	neg := fb < -120
	size := -111 - int(fb)
	if neg {
		size = -119 - int(fb)
	}
	var v int64
	for i := 1; i < size; i++ {
		c, err := r.ReadByte()
		if err != nil {
			return 0, errors.New("truncated vint")
		}
		v = v<<8 | int64(c)
	}
	if neg {
		v = ^v
	}
	return v, nil
}
