package testagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// The exec driver isolates a task as Nomad's does: the task directory is
// the task's root, with the host's /bin, /etc, /lib*, /sbin and /usr bound
// read-only into it, the allocation directory at /alloc, its own /tmp,
// and NOMAD_TASK_DIR /local. The binds are made in a mount namespace of
// the task's own (unshare), so they vanish with the task and can never
// be reached by the agent removing an allocation directory. Like Nomad's,
// it needs root; elsewhere (or without unshare and chroot) exec tasks run
// like raw_exec, and ExecIsolates reports it.

// isolateScript runs as `sh -c isolateScript sh ROOT ALLOCDIR CMD ARGS...`
// in the new mount namespace and ends by exec'ing CMD chrooted in ROOT.
const isolateScript = `set -e
root="$1"; allocdir="$2"; shift 2
for d in bin etc lib lib32 lib64 sbin usr; do
  if [ -L "/$d" ]; then
    ln -sfn "$(readlink "/$d")" "$root/$d"
  elif [ -d "/$d" ]; then
    mkdir -p "$root/$d"
    mount --bind "/$d" "$root/$d"
    mount -o remount,bind,ro "$root/$d"
  fi
done
mkdir -p "$root/alloc" "$root/tmp" "$root/dev"
chmod 1777 "$root/tmp"
mount --bind "$allocdir" "$root/alloc"
touch "$root/dev/null"
mount --bind /dev/null "$root/dev/null"
exec chroot "$root" "$@"
`

var (
	isolationOnce sync.Once
	isolationBins [2]string // unshare, sh
)

// ExecIsolates reports whether this machine runs exec tasks isolated
// (root, with unshare and chroot).
func ExecIsolates() bool {
	isolationOnce.Do(func() {
		if os.Geteuid() != 0 {
			return
		}
		u, err1 := exec.LookPath("unshare")
		_, err2 := exec.LookPath("chroot")
		sh, err3 := exec.LookPath("sh")
		if err1 == nil && err2 == nil && err3 == nil {
			isolationBins = [2]string{u, sh}
		}
	})
	return isolationBins[0] != ""
}

// isolate turns cmd, built for the host, into the same command run in
// the task's own root taskDir (exec driver): paths under taskDir become
// paths under /, and the task's directory variables name the chroot's.
func isolate(cmd *exec.Cmd, taskDir, allocDir string) {
	inner := func(p string) string {
		if rel, err := filepath.Rel(taskDir, p); err == nil && !strings.HasPrefix(rel, "..") {
			return "/" + rel
		}
		return p
	}
	args := append([]string{isolationBins[0], "--mount", "--propagation", "private", isolationBins[1], "-c", isolateScript, "sh",
		taskDir, allocDir, inner(cmd.Path)}, cmd.Args[1:]...)
	cmd.Path, cmd.Args, cmd.Dir = isolationBins[0], args, taskDir
	for i, kv := range cmd.Env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NOMAD_TASK_DIR":
			cmd.Env[i] = k + "=/local"
		case "NOMAD_ALLOC_DIR":
			cmd.Env[i] = k + "=/alloc"
		case "NOMAD_SECRETS_DIR":
			cmd.Env[i] = k + "=/secrets"
		}
	}
}
