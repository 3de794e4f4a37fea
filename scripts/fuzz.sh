#!/usr/bin/env bash
# Runs every Go fuzz target for FUZZTIME each (default 60s; CI uses 8s, so
# the ten targets fuzz for 80 s in all). Each target reads network or
# on-disk input: identifiers, blob keys, REST bodies and paths, JobGraph
# protos, checkpoint metadata, SubmitTask requests and the data plane's
# events and frames. A failure leaves its input in the package's
# testdata/fuzz/<Target>/: fix the bug and commit the input as a
# regression case (go test runs the corpus every time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
targets=(
	./internal/ids:FuzzIdentifiers
	./internal/blob:FuzzParseKey
	./jobmanager/rest:FuzzSubmitJobBody
	./jobmanager/rest:FuzzSavepointBodies
	./jobmanager/rest:FuzzPaths
	./jobmanager/executiongraph:FuzzJobGraphProto
	./jobmanager/checkpoint:FuzzUnmarshalMetadata
	./taskmanager:FuzzCheckSubmitTask
	./taskmanager/network:FuzzDecodeEvent
	./taskmanager/network:FuzzServerFrames
	./storage:FuzzDecodeHadoopToken
)
for t in "${targets[@]}"; do
	pkg=${t%%:*} name=${t##*:}
	echo "== fuzz $name ($pkg) for $FUZZTIME"
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
done
