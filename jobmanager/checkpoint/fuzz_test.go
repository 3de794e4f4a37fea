package checkpoint

import (
	"testing"
)

// FuzzUnmarshalMetadata decodes arbitrary _metadata bytes and plans every
// subtask's restore from what decodes: neither may panic, whatever the
// key groups and parallelism the file claims.
func FuzzUnmarshalMetadata(f *testing.F) {
	b, err := MarshalMetadata(sampleMetadata())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, uint8(2))
	f.Add([]byte{0x08, 0x01}, uint8(1))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, parallelism uint8) {
		md, err := UnmarshalMetadata("fuzz", data)
		if err != nil {
			return
		}
		p := int(parallelism%8) + 1
		var ids []string
		for _, op := range md.Operators {
			ids = append(ids, op.OperatorId)
		}
		for s := range p {
			_ = TaskRestoreFor(md, "file:///chk", ids, s, p)
		}
	})
}
