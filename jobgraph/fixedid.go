package jobgraph

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// ApplicationJobID is the fixed ID of the index-th job (from 0) an
// application cluster's driver submits under high availability (Flink's
// $internal.pipeline.job-id, derived from high-availability.cluster-id):
// a restarted JobManager's driver submits under the same IDs, so its
// submissions find the recovered jobs (or their terminal results) instead
// of starting them again. Deterministic; 32 lower-case hex digits.
func ApplicationJobID(clusterID string, index int) string {
	sum := sha256.Sum256([]byte("gofl-application-job:" + clusterID))
	var b [16]byte
	copy(b[:12], sum[:12])
	binary.BigEndian.PutUint32(b[12:], uint32(index))
	return hex.EncodeToString(b[:])
}
