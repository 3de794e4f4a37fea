# agent-lib.sh: sourced by run.sh and run-client.sh.

# stop_agent PID: stops a Nomad agent gracefully (SIGINT), SIGKILL after
# 10 s, and reaps it. Tasks the agent leaves behind die with their
# executors.
stop_agent() {
  local pid="$1"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid" 2>/dev/null
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}

# remove_data_dir DIR: removes an agent's data directory, first unmounting
# what its exec tasks left mounted below it (a client agent stopped while
# such tasks ran leaves their secrets, private and alloc mounts behind);
# never descends into a mount.
remove_data_dir() {
  local dir="$1" m
  [[ -n "$dir" && -d "$dir" ]] || return 0
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
  if awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
    echo "nomad: mounts remain below $dir; leaving it" >&2
    return 1
  fi
  rm -rf "$dir" 2>/dev/null || true
}
