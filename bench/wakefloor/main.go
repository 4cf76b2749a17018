package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/testkit/procstat"
)

// frameSize is the size of a KEEPALIVE frame as a lease client writes it: the 3-byte length
// prefix, the 6-byte header, the 8-byte last received position and 3 bytes of data.
const frameSize = 20

func main() {
	serve := flag.Bool("serve", false, "run as the server (the child the parent starts)")
	conns := flag.Int("conns", 1000, "connections, one lease client each")
	period := flag.Duration("period", 300*time.Millisecond, "one frame per connection every period (the KEEPALIVE period)")
	answerEvery := flag.Int("answer-every", 2, "the server answers every k-th frame of a connection; 0: never")
	raw := flag.Bool("raw", false, "the server waits for the socket's readiness after a short read instead of reading again until EAGAIN (syscall.RawConn)")
	warmup := flag.Duration("warmup", 5*time.Second, "time before the measured window")
	window := flag.Duration("window", 20*time.Second, "the measured window")
	flag.Parse()
	if *serve {
		if err := runServer(*answerEvery, *raw); err != nil {
			benchkit.Fail(err)
		}
		return
	}
	if err := run(*conns, *period, *answerEvery, *raw, *warmup, *window); err != nil {
		benchkit.Fail(err)
	}
}

// runServer listens on loopback, prints its address, and takes frames off every connection it
// accepts until stdin closes (the parent gone).
func runServer(answerEvery int, raw bool) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if raw {
			go serveRaw(c.(*net.TCPConn), answerEvery)
		} else {
			go serveConn(c, answerEvery)
		}
	}
}

// serveConn reads whole frames as they come (a read may return several, or part of one) and
// answers every answerEvery-th.
func serveConn(c net.Conn, answerEvery int) {
	defer c.Close()
	buf := make([]byte, 4096)
	answer := make([]byte, frameSize)
	pending := 0
	frames := 0
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		pending += n
		for pending >= frameSize {
			pending -= frameSize
			frames++
			if answerEvery > 0 && frames%answerEvery == 0 {
				if _, err := c.Write(answer); err != nil {
					return
				}
			}
		}
	}
}

// serveRaw is serveConn with one read(2) per wake-up: it stays inside syscall.RawConn.Read, whose
// loop waits for the next readiness whenever the callback returns false, so a read that drained
// the socket (a short read) is not followed by one that returns EAGAIN. No edge is lost: data that
// arrives after the read raises a new one.
func serveRaw(c *net.TCPConn, answerEvery int) {
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 4096)
	answer := make([]byte, frameSize)
	pending, frames := 0, 0
	var failed error
	for failed == nil {
		err := rc.Read(func(fd uintptr) bool {
			for {
				n, err := syscall.Read(int(fd), buf)
				switch {
				case err == syscall.EAGAIN:
					return false
				case err == syscall.EINTR:
					continue
				case err != nil:
					failed = err
					return true
				case n == 0:
					failed = io.EOF
					return true
				}
				pending += n
				for pending >= frameSize {
					pending -= frameSize
					frames++
					if answerEvery > 0 && frames%answerEvery == 0 {
						if _, err := syscall.Write(int(fd), answer); err != nil {
							failed = err
							return true
						}
					}
				}
				if n < len(buf) {
					return false
				}
			}
		})
		if err != nil {
			return
		}
	}
}

// run starts the server, opens the connections, waits for the warm-up, and measures the server
// over the window.
func run(conns int, period time.Duration, answerEvery int, raw bool, warmup, window time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-serve", fmt.Sprintf("-answer-every=%d", answerEvery), fmt.Sprintf("-raw=%v", raw))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("the server printed no address: %w", err)
	}
	addr := strings.TrimSpace(line)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	errs := make(chan error, conns)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			cancel()
			return fmt.Errorf("connection %d: %w", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- client(ctx, c, period, time.Duration(i)*period/time.Duration(conns))
		}()
	}
	time.Sleep(warmup)
	pid := cmd.Process.Pid
	before, err := sample(pid)
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(window)
	after, err := sample(pid)
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	frames := float64(conns) * wall / period.Seconds()
	cpu := float64(after.cpuTicks-before.cpuTicks) / 100 / wall
	fmt.Printf("connections %d, one frame each every %v, server answers every %d (0: never), raw %v\n", conns, period, answerEvery, raw)
	fmt.Printf("server CPU %.1f %% of a core over %.1f s; read(2) %.0f/s, write(2) %.0f/s; frames sent %.0f/s; %.1f µs of CPU per frame\n",
		cpu*100, wall, float64(after.calls.Reads-before.calls.Reads)/wall, float64(after.calls.Writes-before.calls.Writes)/wall, frames/wall, cpu/(frames/wall)*1e6)
	return nil
}

// usage is what /proc says of a process at one moment: its CPU ticks and its read(2) and write(2)
// calls so far.
type usage struct {
	cpuTicks int64
	calls    procstat.Syscalls
}

func sample(pid int) (usage, error) {
	ticks, err := procstat.CPUTicks(pid)
	if err != nil {
		return usage{}, err
	}
	calls, err := procstat.ReadSyscalls(pid)
	return usage{cpuTicks: ticks, calls: calls}, err
}

// client writes a frame on c every period, starting after offset, and drains the answers, until
// ctx ends.
func client(ctx context.Context, c net.Conn, period, offset time.Duration) error {
	defer c.Close()
	go func() { _, _ = io.Copy(io.Discard, c) }()
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(offset):
	}
	t := time.NewTicker(period)
	defer t.Stop()
	frame := make([]byte, frameSize)
	for {
		if _, err := c.Write(frame); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
