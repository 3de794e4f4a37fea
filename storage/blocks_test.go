package storage

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/gofl/gofl/storage/storagetest"
)

// TestWebHDFSBlockLocationsDecodesTheAnswer checks the request (op, range,
// token) and the decoding of GETFILEBLOCKLOCATIONS against a fake NameNode.
func TestWebHDFSBlockLocationsDecodesTheAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/webhdfs/v1/data/f.txt" || q.Get("op") != "GETFILEBLOCKLOCATIONS" ||
			q.Get("offset") != "0" || q.Get("length") != "300" || q.Get("delegation") != "tok" {
			http.Error(w, `{"RemoteException":{"exception":"IllegalArgumentException","message":"bad request `+r.URL.String()+`"}}`, http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"BlockLocations":{"BlockLocation":[
			{"offset":0,"length":200,"hosts":["127.0.0.2","127.0.0.3"],"names":["127.0.0.1:1"],"corrupt":false},
			{"offset":200,"length":100,"hosts":["127.0.0.4"],"names":["127.0.0.1:2"],"corrupt":false}]}}`)
	}))
	defer srv.Close()
	w := &webHDFS{base: srv.URL, http: srv.Client(), token: "tok"}
	got, err := w.blockLocations(testCtx(t), "/data/f.txt", 0, 300, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []BlockLocation{{0, 200, []string{"127.0.0.2", "127.0.0.3"}}, {200, 100, []string{"127.0.0.4"}}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || got[i].Length != want[i].Length || !slices.Equal(got[i].Hosts, want[i].Hosts) {
			t.Errorf("block %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := w.blockLocations(testCtx(t), "/data/other", 0, 300, nil); err == nil {
		t.Error("an error answer gave no error")
	}
}

// TestHDFSBlockLocationsNameTheDataNodeHosts writes a file of several
// 1 MiB blocks on the multi-host MiniDFSCluster and checks that every block
// is located on one of its DataNode hosts, in file order.
func TestHDFSBlockLocationsNameTheDataNodeHosts(t *testing.T) {
	t.Parallel()
	h := storagetest.HDFSWithHosts(t)
	p := "/blocks-" + randHex(8) + ".bin"
	const block = 1 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), 5*block/16+7)
	h.Create(t, p, data, block, 1)
	fsys, _, err := Open(testCtx(t), h.NameNode+"/", Options{HadoopConfDir: h.HadoopConfDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	defer fsys.RemoveAll(testCtx(t), p)
	bls, err := fsys.(BlockLocator).BlockLocations(testCtx(t), p, 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(bls) != 6 {
		t.Fatalf("%d blocks, want 6: %+v", len(bls), bls)
	}
	next := int64(0)
	for i, b := range bls {
		if b.Offset != next || len(b.Hosts) != 1 || !slices.Contains(h.DataNodes, b.Hosts[0]) {
			t.Errorf("block %d: %+v; want offset %d on one of %v", i, b, next, h.DataNodes)
		}
		next += b.Length
	}
	if next != int64(len(data)) {
		t.Errorf("blocks cover %d bytes, want %d", next, len(data))
	}
}
