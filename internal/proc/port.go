package proc

import (
	"fmt"
	"net"
	"strconv"
	"sync"
)

var (
	portsMu sync.Mutex
	// handedOut remembers every port given out by this process: the kernel may hand a port that
	// was just closed to the next listen on :0, and two children must not be told the same port.
	handedOut = map[int]bool{}
)

// FreePort returns a loopback TCP port that was free a moment ago and that this process never
// handed out before. See the package doc for the race this leaves.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("proc: free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !handedOut[port] {
			handedOut[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("proc: free port: the kernel kept returning ports already handed out")
}

// FreeAddr is FreePort as "127.0.0.1:port".
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
