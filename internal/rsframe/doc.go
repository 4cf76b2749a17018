// Package rsframe follows the frame boundaries of one direction of an RSocket TCP connection and
// recognises its KEEPALIVE frames, from the bytes alone.
//
// rsocket-go reads and writes a connection through a net.Conn that retryring wraps on both sides
// (coordinator/keepalive.go answers the workers' KEEPALIVEs below rsocket-go; the lease client
// asks for an answer on only some of its own, worker/leaseclient/conn.go). Those wrappers see the
// byte stream cut into reads and writes at any place, so they need to know where each frame
// starts: every frame on TCP begins with a 3-byte length prefix, and Cursor follows them.
//
// It never decodes anything but the length prefix and the KEEPALIVE header, never allocates, and
// does no I/O.
//
//	var c rsframe.Cursor
//	c.Advance(b)       // the bytes just read or written, in stream order
//	c.AtBoundary()     // true when they end exactly at the end of a frame
package rsframe
