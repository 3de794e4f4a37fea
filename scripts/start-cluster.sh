#!/usr/bin/env bash
# Starts a local standalone gofl cluster, like Flink's start-cluster.sh: one
# JobManager and N TaskManagers as background processes, each with a log file
# and a pid file under DIR. Waits until the REST API reports N registered
# TaskManagers, then prints the REST address. Stop it with stop-cluster.sh.
#
# Usage: scripts/start-cluster.sh [-n NUM_TASKMANAGERS] [-j NUM_JOBMANAGERS] [--dir DIR] [-- EXTRA_GOFL_FLAGS...]
#
# With -j N > 1 (high availability: EXTRA_GOFL_FLAGS must set
# high-availability.type=zookeeper, its quorum and storageDir) N JobManagers
# start, one leading and the others standing by; JobManager i listens on
# rest.port+i-1 and jobmanager.rpc.port+i-1, and the TaskManagers find the
# leader through ZooKeeper.
#
# EXTRA_GOFL_FLAGS (configuration flags such as -D key=value or --config FILE)
# go to every process. rest.address/rest.port are read back with
# `gofl config` so the readiness check polls the right endpoint.
# Environment: GOFL (binary, default bin/gofl, built with `make build` if
# missing), START_TIMEOUT (seconds, default 30).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gofl="${GOFL:-$root/bin/gofl}"
num_tm=1
num_jm=1
dir=./.gofl-cluster
timeout="${START_TIMEOUT:-30}"
extra=()

usage() {
	echo "usage: scripts/start-cluster.sh [-n NUM_TASKMANAGERS] [-j NUM_JOBMANAGERS] [--dir DIR] [-- EXTRA_GOFL_FLAGS...]"
}

die() {
	echo "start-cluster: $*" >&2
	exit 1
}

while (($#)); do
	case "$1" in
	-n | --taskmanagers)
		[[ $# -ge 2 ]] || die "$1 needs a number"
		num_tm="$2"
		shift 2
		;;
	-j | --jobmanagers)
		[[ $# -ge 2 ]] || die "$1 needs a number"
		num_jm="$2"
		shift 2
		;;
	--dir)
		[[ $# -ge 2 ]] || die "--dir needs a directory"
		dir="$2"
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	--)
		shift
		extra=("$@")
		break
		;;
	*)
		usage >&2
		die "unknown argument '$1'"
		;;
	esac
done
[[ "$num_tm" =~ ^[0-9]+$ ]] || die "-n wants a number of TaskManagers, not '$num_tm'"
[[ "$num_jm" =~ ^[1-9][0-9]*$ ]] || die "-j wants a number of JobManagers (1 or more), not '$num_jm'"
[[ "$timeout" =~ ^[0-9]+$ ]] || die "START_TIMEOUT wants seconds, not '$timeout'"

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# Refuse to start a second cluster over a live one in the same directory.
for pidfile in "$dir"/*.pid; do
	[[ -e "$pidfile" ]] || continue
	pid="$(<"$pidfile")"
	if [[ "$pid" =~ ^[0-9]+$ ]] && ps -p "$pid" -o stat= 2>/dev/null | grep -qv '^Z'; then
		die "a cluster is already running in $dir ($(basename "$pidfile" .pid) has pid $pid); stop it with scripts/stop-cluster.sh --dir $dir"
	fi
	rm -f "$pidfile"
done

if [[ ! -x "$gofl" ]]; then
	if [[ -n "${GOFL:-}" ]]; then
		die "GOFL=$gofl is not an executable"
	fi
	echo "start-cluster: $gofl is missing; running make build" >&2
	make -C "$root" build >&2
fi

# The REST endpoint, as the JobManager will read it from the same flags.
config_value() {
	"$gofl" config "${extra[@]}" 2>/dev/null | awk -v k="$1" '$1 == k { print $2; exit }'
}
rest_address="$(config_value rest.address || true)"
rest_port="$(config_value rest.port || true)"
rest_address="${rest_address:-localhost}"
rest_port="${rest_port:-8081}"
rpc_port="$(config_value jobmanager.rpc.port || true)"
rpc_port="${rpc_port:-6123}"
[[ "$rest_address" == '""' ]] && rest_address=localhost
[[ "$rest_address" == *:* ]] && rest_address="[$rest_address]" # IPv6
rest_url="http://$rest_address:$rest_port"

started=()

# alive PID: the process exists and is not a zombie (kill -0 succeeds on
# zombies, and detached children are reaped by init, maybe late).
alive() {
	local stat
	stat="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
	[[ -n "$stat" && "$stat" != Z* ]]
}

# start NAME ARGS...: runs gofl ARGS in the background, detached from this
# shell's stdin, with its log and pid file under $dir.
start() {
	local name="$1"
	shift
	local log="$dir/$name.log"
	[[ -e "$log" ]] && mv -f "$log" "$log.1" # keep the previous run's log
	echo "=== $(date '+%Y-%m-%d %H:%M:%S') $gofl $*" >"$log"
	nohup "$gofl" "$@" >>"$log" 2>&1 </dev/null &
	echo $! >"$dir/$name.pid"
	started+=("$name")
}

# abort stops what this run started and shows the tail of each log.
abort() {
	echo "start-cluster: $*" >&2
	for name in "${started[@]}"; do
		echo "--- last lines of $dir/$name.log:" >&2
		tail -n 20 "$dir/$name.log" >&2 || true
	done
	"$root/scripts/stop-cluster.sh" --dir "$dir" >&2 || true
	exit 1
}
trap 'abort "interrupted"' INT TERM

# get_overview prints the body of GET /overview, or fails.
get_overview() {
	if command -v curl >/dev/null 2>&1; then
		# -L: a standby JobManager redirects to the leader.
		curl -fsSL --max-time 2 "$rest_url/overview" 2>/dev/null
		return
	fi
	# bash's /dev/tcp: a bare HTTP/1.0 request, body after the blank line.
	local host="${rest_address#[}"
	host="${host%]}"
	local fd response
	{ exec {fd}<>"/dev/tcp/$host/$rest_port"; } 2>/dev/null || return 1
	printf 'GET /overview HTTP/1.0\r\nHost: %s\r\n\r\n' "$host" >&"$fd"
	response="$(timeout 2 cat <&"$fd" || true)"
	exec {fd}>&-
	[[ "$response" == "HTTP/1."?" 200"* ]] || return 1
	printf '%s\n' "${response#*$'\r\n\r\n'}"
}

start jobmanager jobmanager "${extra[@]}"
for ((i = 2; i <= num_jm; i++)); do
	start "jobmanager-$i" jobmanager "${extra[@]}" -D "rest.port=$((rest_port + i - 1))" -D "jobmanager.rpc.port=$((rpc_port + i - 1))"
done
for ((i = 1; i <= num_tm; i++)); do
	start "taskmanager-$i" taskmanager -D taskmanager.rpc.port=0 "${extra[@]}"
done

deadline=$((SECONDS + timeout + 1)) # SECONDS ticks in whole seconds
registered=-1
while :; do
	for name in "${started[@]}"; do
		alive "$(<"$dir/$name.pid")" || abort "$name exited during startup (log: $dir/$name.log)"
	done
	if body="$(get_overview)"; then
		registered="$(grep -o '"taskmanagers": *[0-9]*' <<<"$body" | grep -o '[0-9]*$' || echo -1)"
		if ((registered >= num_tm)); then
			break
		fi
	fi
	if ((SECONDS >= deadline)); then
		if ((registered < 0)); then
			abort "the REST API at $rest_url did not answer GET /overview within ${timeout}s"
		fi
		abort "only $registered of $num_tm TaskManagers registered at $rest_url within ${timeout}s"
	fi
	sleep 0.2
done
trap - INT TERM

echo "Started a gofl cluster: $num_jm JobManager(s), $num_tm TaskManager(s); logs and pid files in $dir"
echo "REST API: $rest_url"
