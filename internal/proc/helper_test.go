package proc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the child process of these tests: with PROC_HELPER set, TestMain
// runs helperMain instead of the tests.
const helperEnv = "PROC_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helperMain(mode)
		return
	}
	os.Exit(m.Run())
}

// helperMain is a small server: /healthz answers 200; SIGTERM ends it with status 0 after
// printing "graceful" unless the mode ignores SIGTERM.
func helperMain(mode string) {
	switch mode {
	case "bind-fail":
		fmt.Println("listen tcp 127.0.0.1:1: bind: address already in use")
		os.Exit(1)
	case "env":
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "RETRYRING_") || strings.HasPrefix(kv, "PROC_EXTRA") {
				fmt.Println("env:", kv)
			}
		}
		return
	case "parent":
		// Launch a grandchild through this package and report its pid, then wait to be killed.
		dir := os.Getenv("PROC_HELPER_DIR")
		exe, _ := os.Executable()
		p, err := Launch(Spec{Name: "grandchild", Path: exe, LogDir: dir,
			Env: []string{helperEnv + "=http", "PROC_HELPER_ADDR=127.0.0.1:0"}})
		if err != nil {
			fmt.Println("launch:", err)
			os.Exit(1)
		}
		fmt.Printf("grandchild pid %d\n", p.Pid())
		select {}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	ln, err := net.Listen("tcp", os.Getenv("PROC_HELPER_ADDR"))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("serving on", ln.Addr())
	if mode == "ignore-term" {
		select {}
	}
	<-ctx.Done()
	fmt.Println("graceful")
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
}

// launchHelper launches the test binary as a helper in mode, serving on a free port.
func launchHelper(t *testing.T, g *Group, name, mode string) (*Process, string) {
	t.Helper()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Launch(Spec{Name: name, Path: exe, Env: []string{helperEnv + "=" + mode, "PROC_HELPER_ADDR=" + addr}})
	if err != nil {
		t.Fatal(err)
	}
	return p, "http://" + addr + "/healthz"
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newTestGroup is a group in t's temporary directory, closed when t ends. (testkit/proctest's
// NewGroup, which also prints the logs of a failed test, imports this package, so these tests
// cannot use it.)
func newTestGroup(t *testing.T) *Group {
	t.Helper()
	g, err := GroupIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("proc: %v", err)
		}
	})
	return g
}
