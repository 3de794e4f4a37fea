package network

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

const producerEnv = "GOFL_NETWORK_BENCH_PRODUCER"

// runProducerProcess is the producer role of the two-process benchmark: the
// test binary re-executed with producerEnv set. It serves one pipelined
// partition "bench" with N records of SIZE bytes, prints its data address
// and exits when stdin closes.
func runProducerProcess() int {
	n, _ := strconv.Atoi(os.Getenv("GOFL_BENCH_N"))
	size, _ := strconv.Atoi(os.Getenv("GOFL_BENCH_SIZE"))
	env, err := NewShuffleEnvironment(Config{}, zerolog.New(os.Stderr).Level(zerolog.WarnLevel))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	if err := env.Start("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := env.CreateResultPartition(context.Background(), "bench", Pipelined, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ADDR %s\n", env.Addr())
	rec := make([]byte, size)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := p.Emit(0, rec); err != nil {
				done <- err
				return
			}
		}
		done <- p.Finish()
	}()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startProducerProcess re-executes the test binary as a producer; stop
// closes its stdin and expects a clean exit.
func startProducerProcess(tb testing.TB, n, size int) (addr string, stop func()) {
	cmd, addr, stdin := startProducerCmd(tb, n, size)
	return addr, func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			tb.Errorf("producer process: %v", err)
		}
	}
}

// startProducerCmd starts the producer process and returns it with its
// data address and stdin; the caller waits for it.
func startProducerCmd(tb testing.TB, n, size int) (*exec.Cmd, string, io.WriteCloser) {
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), producerEnv+"=1", fmt.Sprintf("GOFL_BENCH_N=%d", n), fmt.Sprintf("GOFL_BENCH_SIZE=%d", size))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		cmd.Process.Kill()
		cmd.Wait()
		tb.Fatalf("producer process: %q %v", line, err)
	}
	return cmd, strings.TrimSpace(strings.TrimPrefix(line, "ADDR ")), stdin
}
