#!/usr/bin/env bash
# Stops a cluster started by start-cluster.sh: TaskManagers first, then the
# JobManager (as Flink's stop-cluster.sh does), each with SIGTERM and, after
# 10 s, SIGKILL. Removes the pid files; logs stay.
#
# Usage: scripts/stop-cluster.sh [--dir DIR]
# Environment: STOP_TIMEOUT (seconds before SIGKILL, default 10).
set -euo pipefail

dir=./.gofl-cluster
grace="${STOP_TIMEOUT:-10}"

die() {
	echo "stop-cluster: $*" >&2
	exit 1
}

while (($#)); do
	case "$1" in
	--dir)
		[[ $# -ge 2 ]] || die "--dir needs a directory"
		dir="$2"
		shift 2
		;;
	-h | --help)
		echo "usage: scripts/stop-cluster.sh [--dir DIR]"
		exit 0
		;;
	*) die "unknown argument '$1'; usage: scripts/stop-cluster.sh [--dir DIR]" ;;
	esac
done
[[ "$grace" =~ ^[0-9]+$ ]] || die "STOP_TIMEOUT wants seconds, not '$grace'"
[[ -d "$dir" ]] || {
	echo "stop-cluster: no cluster directory $dir; nothing to stop"
	exit 0
}

# is_ours PID: the process is alive and still a gofl process, so a recycled
# pid of an unrelated process is never signalled.
is_ours() {
	local args
	alive "$1" || return 1
	args="$(ps -p "$1" -o args= 2>/dev/null)" || return 1
	[[ "$args" == *gofl* ]]
}

# alive PID: the process exists and is not a zombie waiting to be reaped
# (kill -0 succeeds on zombies, and our children are reaped by init).
alive() {
	local stat
	stat="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
	[[ -n "$stat" && "$stat" != Z* ]]
}

# stop_group PIDFILES...: TERM all, wait for them together, KILL leftovers.
stop_group() {
	local pidfile pid pids=() names=()
	for pidfile in "$@"; do
		[[ -e "$pidfile" ]] || continue
		pid="$(<"$pidfile")"
		if [[ "$pid" =~ ^[0-9]+$ ]] && is_ours "$pid"; then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
			names+=("$(basename "$pidfile" .pid)")
		fi
	done
	local polls=$((grace * 10)) alive i
	while :; do
		alive=()
		for i in "${!pids[@]}"; do
			if alive "${pids[$i]}"; then alive+=("$i"); fi
		done
		((${#alive[@]} == 0)) && break
		if ((polls-- <= 0)); then
			for i in "${alive[@]}"; do
				echo "stop-cluster: ${names[$i]} (pid ${pids[$i]}) did not stop within ${grace}s; killing it" >&2
				kill -KILL "${pids[$i]}" 2>/dev/null || true
			done
			break
		fi
		sleep 0.1
	done
	for i in "${!pids[@]}"; do
		echo "Stopped ${names[$i]} (pid ${pids[$i]})"
	done
	for pidfile in "$@"; do
		rm -f "$pidfile"
	done
}

shopt -s nullglob
stop_group "$dir"/taskmanager-*.pid
stop_group "$dir"/jobmanager.pid "$dir"/jobmanager-*.pid
