package storage

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
)

// Hadoop's WritableUtils.writeVLong encodings of a few values.
func TestReadVLong(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want int64
	}{
		{[]byte{0x00}, 0}, {[]byte{0x7f}, 127}, {[]byte{0x90}, -112},
		{[]byte{0x8f, 0x80}, 128}, {[]byte{0x8e, 0x01, 0x00}, 256},
		{[]byte{0x87, 0x70}, -113}, {[]byte{0x88, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}, 0x0102030405060708},
	} {
		got, err := readVLong(bytes.NewReader(c.in))
		if err != nil || got != c.want {
			t.Errorf("readVLong(% x) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	if _, err := readVLong(bytes.NewReader([]byte{0x8e, 0x01})); err == nil {
		t.Error("a truncated vlong was read")
	}
}

// vbytes is a vint length (< 128) and b.
func vbytes(b string) []byte { return append([]byte{byte(len(b))}, b...) }

// A token in Hadoop's URL string form decodes to its parts, and its
// identifier names the owner's short name.
func TestDecodeHadoopToken(t *testing.T) {
	id := append([]byte{0}, vbytes("gofl/host@GOFL.TEST")...)
	id = append(id, vbytes("gofl")...)
	id = append(id, vbytes("")...)
	var raw []byte
	for _, f := range [][]byte{id, []byte("secret-pw"), []byte("HDFS_DELEGATION_TOKEN"), []byte("127.0.0.1:8020")} {
		raw = append(raw, byte(len(f)))
		raw = append(raw, f...)
	}
	tok, err := decodeHadoopToken(base64.RawURLEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tok.Identifier, id) || string(tok.Password) != "secret-pw" || tok.Kind != "HDFS_DELEGATION_TOKEN" || tok.Service != "127.0.0.1:8020" {
		t.Fatalf("decoded %+v", tok)
	}
	if owner, err := tokenOwner(tok.Identifier); err != nil || owner != "gofl" {
		t.Fatalf("owner %q, %v", owner, err)
	}
	for _, bad := range []string{"!!", base64.RawURLEncoding.EncodeToString(raw[:len(raw)-3]), base64.RawURLEncoding.EncodeToString([]byte{0x7f})} {
		if _, err := decodeHadoopToken(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("decodeHadoopToken(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := tokenOwner([]byte{0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an identifier without owner: %v", err)
	}
}

// Any string decodes to a token or an ErrInvalid error, never a panic; a
// decoded identifier's owner too.
func FuzzDecodeHadoopToken(f *testing.F) {
	f.Add("AAAA")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte{3, 0, 1, 'a', 2, 'p', 'w', 1, 'K', 1, 'S'}))
	f.Add(base64.RawURLEncoding.EncodeToString([]byte{0x88, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeHadoopToken(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if _, err := tokenOwner(tok.Identifier); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("owner error %v does not wrap ErrInvalid", err)
		}
	})
}

// A received token is checked before use: a NameNode host:port and a
// token in Hadoop's form; the error never holds the secret.
func TestDelegationTokenValidate(t *testing.T) {
	var raw []byte
	for _, f := range []string{"\x00\x04gofl\x04gofl\x00", "secret-pw", "HDFS_DELEGATION_TOKEN", "nn:8020"} {
		raw = append(raw, vbytes(f)...)
	}
	good := DelegationToken{NameNode: "nn:8020", Token: base64.RawURLEncoding.EncodeToString(raw)}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good token: %v", err)
	}
	for _, bad := range []DelegationToken{
		{NameNode: "nn", Token: good.Token},
		{NameNode: "", Token: good.Token},
		{NameNode: "nn:8020", Token: ""},
		{NameNode: "nn:8020", Token: "not a token secret-pw"},
		{NameNode: "nn:8020", Token: good.Token[:len(good.Token)-4]},
	} {
		err := bad.Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%s) = %v, want ErrInvalid", bad, err)
		} else if bytes.Contains([]byte(err.Error()), []byte("secret-pw")) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}
