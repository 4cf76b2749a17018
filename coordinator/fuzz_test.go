package coordinator

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"
	"github.com/rsocket/rsocket-go/extension"
	"github.com/rsocket/rsocket-go/payload"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// The fuzz targets of the coordinator's decoders. `go test` runs their seeds (the f.Add calls and
// testdata/fuzz/<Target>/); `go test -run '^$' -fuzz '^FuzzX$' ./coordinator` searches further.
// Targets that need a node start one real single-node cluster on loopback and reuse it for every
// input; their loggers are Nop because the fuzz function may not call f's methods.

// FuzzRSocketServerRawBytes writes arbitrary bytes to the coordinator's RSocket port, on a fresh
// connection each time, and checks that the node survives (a panic in any of its goroutines
// would end the test binary) and still answers. The seeds are valid, truncated and hostile frame
// sequences; `go test -fuzz FuzzRSocketServerRawBytes ./coordinator` explores from them.
//
// Under -race, rsocket-go v0.8.16 itself reports a race when a connection dies (a bad frame, EOF)
// while an answer is being queued: DuplexConnection.Close closes its send queue while sendFrame
// sends to it (sendFrame recovers the panic, so it is harmless without -race). The seeds avoid
// that sequence: a request immediately followed by a connection-killing frame.
func FuzzRSocketServerRawBytes(f *testing.F) {
	setup := validSetup("fuzz")
	join := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
	f.Add([]byte{})
	f.Add([]byte("garbage that is not rsocket at all"))
	f.Add(setup)
	f.Add(setup[:len(setup)-3])
	f.Add(join(setup, requestStreamFrame(1, lease.RouteLeases, []byte(`{}`))))
	f.Add(join(setup, requestResponseFrame(1, lease.RouteView, nil), requestResponseFrame(3, lease.RouteRelease, []byte(`{"worker_id":"fuzz","epoch":99}`))))
	f.Add(join(setup, requestResponseFrame(1, lease.RouteLeave, []byte(`{"worker_id":"fuzz"}`))))
	f.Add(join(setup, frameBytes(framing.NewWriteableRequestChannelFrame(1, 1, []byte(`{}`), composite(lease.RouteLeases), 0)),
		frameBytes(framing.NewWriteableCancelFrame(1))))
	f.Add(join(setup, frameBytes(framing.NewWriteableFireAndForgetFrame(1, []byte(`{}`), composite("x"), 0)),
		frameBytes(framing.NewWriteableMetadataPushFrame([]byte{1, 2, 3}))))
	f.Add(join(setup, requestStreamFrame(1, lease.RouteLeases, nil), frameBytes(framing.NewWriteableCancelFrame(1)),
		frameBytes(framing.NewWriteableRequestNFrame(1, 5, 0)), frameBytes(framing.NewWriteableRequestNFrame(7, 1, 0))))
	f.Add(join(setup, frameBytes(framing.NewWriteableErrorFrame(1, core.ErrorCodeApplicationError, []byte("x"))),
		frameBytes(framing.NewWriteableErrorFrame(0, core.ErrorCodeConnectionError, []byte("bye")))))
	f.Add(join(setup, frameBytes(framing.NewWriteableKeepaliveFrame(0, nil, true)), frameBytes(framing.NewWriteableLeaseFrame(time.Second, 1, nil))))
	f.Add(join(setup, frameBytes(framing.NewWriteablePayloadFrame(1, []byte(`{}`), nil, core.FlagNext|core.FlagFollow))))
	f.Add(frameBytes(framing.NewWriteableSetupFrame(core.DefaultVersion, time.Second, time.Second, []byte("token"),
		[]byte(lease.MetadataMIME), []byte(lease.DataMIME), []byte(`{}`), nil, true)))
	f.Add(frameBytes(framing.NewWriteableResumeFrame(core.DefaultVersion, []byte("token"), 0, 0)))
	f.Add(join(setup, setup))
	f.Add(join(setup, requestResponseFrame(1, "", nil)))
	f.Add(join(setup, []byte{0, 0, 1, 0}))
	f.Add(join(springSetup("fuzz"), requestStreamFrame(1, lease.RouteLeases, []byte(`{}`))))
	f.Add(rawSetupFrame(core.FlagMetadata, lease.DataMIME, lease.MetadataMIME, []byte{0xfe, 0, 0, 200}, nil))

	// The fuzz function must not call f's methods, and a logger writing to f.Log would.
	c := newCluster(f, 1, func(_ int, cfg *Config) { cfg.Logger = zerolog.Nop() })
	leader := c.leader()
	addr := leader.RSocketAddr()
	f.Fuzz(func(t *testing.T, data []byte) {
		conn := dialRaw(t, addr)
		_, _ = conn.Write(data)
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var buf [4096]byte
		for {
			if _, err := conn.Read(buf[:]); err != nil {
				break
			}
		}
		_ = conn.Close()
		if !leader.IsLeader() {
			t.Fatal("the node lost its leadership")
		}
	})
}

// rawSetupFrame builds a SETUP frame by hand, with its 3-byte length, so that the flags and the
// metadata field can be what rsocket-go's builder never writes (it drops the metadata flag when
// the metadata is empty).
func rawSetupFrame(flags core.FrameFlag, dataMIME, metadataMIME string, metadata, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0, 0}) // stream 0
	b.Write(binary.BigEndian.AppendUint16(nil, uint16(core.FrameTypeSetup)<<10|uint16(flags)))
	b.Write([]byte{0, 1, 0, 0})                        // version 1.0
	b.Write(binary.BigEndian.AppendUint32(nil, 200))   // time between keepalives, ms
	b.Write(binary.BigEndian.AppendUint32(nil, 90000)) // max lifetime, ms
	b.WriteByte(byte(len(metadataMIME)))
	b.WriteString(metadataMIME)
	b.WriteByte(byte(len(dataMIME)))
	b.WriteString(dataMIME)
	if flags&core.FlagMetadata != 0 {
		n := len(metadata)
		b.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
		b.Write(metadata)
	}
	b.Write(data)
	n := b.Len()
	return append([]byte{byte(n >> 16), byte(n >> 8), byte(n)}, b.Bytes()...)
}

// springSetup is the SETUP a Spring RSocketRequester sends: the metadata flag set, with empty
// metadata, and the JSON data.
func springSetup(workerID string) []byte {
	data, _ := json.Marshal(lease.Setup{WorkerID: workerID, Incarnation: workerID + "-spring", Region: testRing.Region, Cluster: testRing.Cluster, Service: testRing.Service})
	return rawSetupFrame(core.FlagMetadata, lease.DataMIME, lease.MetadataMIME, []byte{}, data)
}

// FuzzParseSetup runs parseSetup, the acceptor's decoder, on any SETUP frame (the input is a frame
// without its length; its type is forced to SETUP so that every input reaches the decoder). The
// acceptor recovers from a panic inside rsocket-go's accessors, which index without bounds checks;
// this target asserts that such a panic comes only from a frame whose MIME or metadata lengths
// run past its end, so that the recover hides no bug of ours. A refusal is a bad_setup WireError;
// an accepted SETUP has the exact MIME types, passes Validate and survives a JSON round trip.
func FuzzParseSetup(f *testing.F) {
	body := func(frame []byte) []byte { return frame[3:] }
	data, _ := json.Marshal(lease.Setup{WorkerID: "w", Incarnation: "i", Region: "r", Cluster: "c", Service: "s", Token: "t", Features: []string{lease.FeatureControls}})
	f.Add(body(validSetup("fuzz")))
	f.Add(body(springSetup("fuzz")))
	f.Add(body(rawSetupFrame(core.FlagMetadata, lease.DataMIME, lease.MetadataMIME, composite(lease.RouteLeases), data)))
	f.Add(body(rawSetupFrame(core.FlagMetadata, lease.DataMIME, lease.MetadataMIME, []byte{0, 0}, nil)))
	f.Add(body(rawSetupFrame(0, lease.DataMIME, lease.MetadataMIME, nil, []byte(`{"worker_id":"w","incarnation":"i","region":"r","cluster":"c","service":"s","features":[]}`))))
	f.Add(body(rawSetupFrame(core.FlagResume, lease.DataMIME, lease.MetadataMIME, nil, data)))
	f.Add(body(setupFrame(data, "application/binary", lease.MetadataMIME)))
	f.Add(body(setupFrame([]byte(`{"worker_id":`), lease.DataMIME, lease.MetadataMIME)))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < core.FrameHeaderLen {
			return
		}
		frame = bytes.Clone(frame)
		frame[4] = frame[4]&0x03 | byte(core.FrameTypeSetup)<<2
		fr, err := framing.FromBytes(frame)
		if err != nil {
			t.Fatalf("a frame with a whole header is refused: %v", err)
		}
		defer fr.Release()
		sf := fr.(*framing.SetupFrame)
		var s lease.Setup
		panicked := func() (p any) {
			defer func() { p = recover() }()
			s, err = parseSetup(sf)
			return nil
		}()
		if panicked != nil {
			if setupWellFormed(frame) {
				t.Fatalf("parseSetup panicked on a well-formed SETUP frame %q: %v", frame, panicked)
			}
			return
		}
		if err != nil {
			var we *lease.WireError
			if !errors.As(err, &we) || we.Code != lease.CodeBadSetup || we.Message == "" {
				t.Fatalf("refused with %v (%T), want a bad_setup WireError with a message", err, err)
			}
			return
		}
		if sf.DataMimeType() != lease.DataMIME || sf.MetadataMimeType() != lease.MetadataMIME {
			t.Fatalf("accepted MIME types %q and %q", sf.DataMimeType(), sf.MetadataMimeType())
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted a SETUP that does not validate: %+v: %v", s, err)
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back lease.Setup
		if err := json.Unmarshal(enc, &back); err != nil || back.WorkerID != s.WorkerID || back.Incarnation != s.Incarnation ||
			back.Ring() != s.Ring() || back.Token != s.Token || !slices.Equal(back.Features, s.Features) {
			t.Fatalf("%+v does not survive a JSON round trip: %+v, %v", s, back, err)
		}
	})
}

// setupWellFormed is the model of a SETUP frame (with its 6-byte header) whose fields all lie
// inside it: the resume token, both MIME types and, with the metadata flag, the metadata length
// (rsocket-go reads a metadata field shorter than its 3-byte length as no metadata).
func setupWellFormed(frame []byte) bool {
	flags := core.FrameFlag(binary.BigEndian.Uint16(frame[4:6]) & 0x3ff)
	b := frame[core.FrameHeaderLen:]
	off := 12
	if flags&core.FlagResume != 0 {
		if len(b) < 14 {
			return false
		}
		off = 14 + int(binary.BigEndian.Uint16(b[12:14]))
	}
	for range 2 { // metadata MIME, data MIME
		if off >= len(b) {
			return false
		}
		off += 1 + int(b[off])
	}
	if off > len(b) {
		return false
	}
	if rest := b[off:]; flags&core.FlagMetadata != 0 && len(rest) >= 3 {
		return 3+(int(rest[0])<<16|int(rest[1])<<8|int(rest[2])) <= len(rest)
	}
	return true
}

// TestSetupWithEmptyMetadataIsAccepted: a SETUP with the metadata flag set and empty metadata
// (what Spring's RSocketRequester sends), and one carrying metadata, are accepted like one
// without metadata (docs/protocol.md section 2 says so): the worker gets its lease.
func TestSetupWithEmptyMetadataIsAccepted(t *testing.T) {
	c := newCluster(t, 1, nil)
	leader := c.leader()
	// Another ring than springSetup's, so that each worker gets a whole ring at once.
	data, _ := json.Marshal(lease.Setup{WorkerID: "meta", Incarnation: "meta-1", Region: testRing.Region, Cluster: testRing.Cluster, Service: "other"})
	for name, frame := range map[string][]byte{
		"metadata flag, empty metadata": springSetup("spring"),
		"metadata flag, some metadata":  rawSetupFrame(core.FlagMetadata, lease.DataMIME, lease.MetadataMIME, composite(lease.RouteLeases), data),
	} {
		t.Run(name, func(t *testing.T) {
			conn := dialRaw(t, leader.RSocketAddr())
			conn.send(frame, requestStreamFrame(1, lease.RouteLeases, []byte(`{}`)))
			f, err := conn.next(10 * time.Second)
			if err != nil {
				t.Fatalf("want a lease element: %v", err)
			}
			pf, ok := f.(*framing.PayloadFrame)
			if !ok {
				if ef, isErr := f.(*framing.ErrorFrame); isErr {
					t.Fatalf("refused: %s %s", ef.ErrorCode(), ef.ErrorData())
				}
				t.Fatalf("want a lease element, got %s", f.Header().Type())
			}
			var el lease.WireLease
			if err := json.Unmarshal(pf.Data(), &el); err != nil || el.Epoch == 0 || len(el.Ranges) == 0 {
				t.Fatalf("want a lease element with ranges, got %q (%v)", pf.Data(), err)
			}
		})
	}
}

// FuzzRouteOf: any metadata gives a route or an error of the catalog (bad_request for a
// truncated entry, unknown_route without a routing entry), never a panic; and a route written
// by rsocket-go's own builder is found whatever entries come before and after it.
func FuzzRouteOf(f *testing.F) {
	f.Add(composite(lease.RouteRelease), lease.RouteLeases)
	f.Add([]byte{0xfe, 0, 0, 9, 1}, lease.RouteView)
	f.Add([]byte{0x7f}, "")
	f.Add(mustBuild(extension.NewCompositeMetadataBuilder().PushString("text/plain", "x")), lease.RouteReport)
	f.Add([]byte{0x1c, 'm', 'e', 's', 's', 'a', 'g', 'e', '/', 'x', '.', 'r', 's', 'o', 'c', 'k', 'e', 't', '.', 'r', 'o', 'u', 't', 'i', 'n', 'g', '.', 'v', '0', 0, 0, 2, 1, 'a'}, "b")
	f.Fuzz(func(t *testing.T, md []byte, route string) {
		got, err := routeOf(md)
		if err != nil && !errors.Is(err, lease.ErrBadRequest) && !errors.Is(err, lease.ErrUnknownRoute) {
			t.Fatalf("routeOf(%q) = %v, outside the catalog", md, err)
		}
		if err == nil && !bytes.Contains(md, []byte(got)) {
			t.Fatalf("routeOf(%q) = %q, which is not in the metadata", md, got)
		}
		tags, err := extension.EncodeRouting(route)
		if err != nil || len(route) == 0 {
			return
		}
		other := mustBuild(extension.NewCompositeMetadataBuilder().PushString("text/plain", string(md)))
		routing := mustBuild(extension.NewCompositeMetadataBuilder().PushWellKnown(extension.MessageRouting, tags))
		for _, in := range [][]byte{routing, append(slices.Clip(other), routing...), append(slices.Clip(routing), md...)} {
			if got, err := routeOf(in); err != nil || got != route {
				t.Fatalf("routeOf(%q) = %q, %v; want %q", in, got, err, route)
			}
		}
	})
}

// fuzzRoutes are the routes FuzzRouteRequests picks from by its first argument: the five of the
// protocol, an unknown one, and no routing metadata at all.
var fuzzRoutes = []string{lease.RouteLeases, lease.RouteRelease, lease.RouteLeave, lease.RouteReport, lease.RouteView, "ring.nope", ""}

// fuzzWorker is the SETUP of the connection FuzzRouteRequests sends its requests on.
var fuzzWorker = lease.Setup{WorkerID: "fuzz", Incarnation: "fuzz-1", Region: testRing.Region, Cluster: testRing.Cluster, Service: testRing.Service}

// FuzzRouteRequests sends each route's request data, as a worker's payload, to the responder of a
// real leader: every answer is either what the route answers (an ack, the ring view) or an error
// frame whose data is a WireError of the catalog; never internal. A model of each route's decoding
// decides which: bad_request exactly when the body is not the route's JSON, names another worker,
// or (ring.report) breaks a limit; a body that decodes gets the route's own answers (for a
// release or leave of this non-member: unknown_worker, or what a commit that did not happen says).
// The connection is marked closed, so that a ring.leases request that decodes stops at
// "unavailable" before it would join the member and open a stream.
func FuzzRouteRequests(f *testing.F) {
	report, _ := json.Marshal(lease.Report{WorkerID: "fuzz", Executions: map[string]uint64{"done": 3}, Breakers: []lease.BreakerReport{{Impl: "p", State: lease.BreakerOpen, OpenUntilMs: 5}}, PendingRows: 2})
	for i, bodies := range [][]string{
		{`{}`, `{"worker_id":"fuzz"}`, `{"worker_id":"other"}`, `[`, ``},
		{`{"worker_id":"fuzz","epoch":1}`, `{"worker_id":"fuzz","epoch":-1}`, `{"worker_id":"fuzz","epoch":18446744073709551616}`, `{"worker_id":"fuzz"}`, `null`},
		{`{"worker_id":"fuzz"}`, `{"worker_id":"other"}`, `{"worker_id":1}`, ` `},
		{string(report), `{"worker_id":"fuzz","breakers":[{"state":"closed"}]}`, `{"worker_id":"fuzz","executions":{"":1}}`, `{"worker_id":"fuzz","pending_rows":-1}`},
		{`{}`, ``, `x`},
		{`{}`},
		{`{}`},
	} {
		for _, b := range bodies {
			f.Add(uint8(i), []byte(b))
		}
	}
	c := newCluster(f, 1, func(_ int, cfg *Config) { cfg.Logger = zerolog.Nop() })
	leader := c.leader()
	eventually(f, 30*time.Second, "the leader ready", func() bool { t := leader.currentTerm(); return t != nil && t.isReady() })
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		route := fuzzRoutes[int(which)%len(fuzzRoutes)]
		conn := &workerConn{id: 1, setup: fuzzWorker, member: newMemberID(fuzzWorker), log: zerolog.Nop(),
			streams: map[*leaseStream]struct{}{}, closed: true}
		var md []byte
		if route != "" {
			md = composite(route)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rs := leader.responder(conn)
		var answer payload.Payload
		var err error
		if route == lease.RouteLeases {
			_, err = rs.RequestStream(payload.New(data, md)).BlockLast(ctx)
		} else {
			answer, err = rs.RequestResponse(payload.New(data, md)).Block(ctx)
		}
		wantBad := !routeBodyDecodes(route, data)
		if err == nil {
			if wantBad || route == lease.RouteLeases {
				t.Fatalf("%s %q answered %q, want an error", route, data, answerData(answer))
			}
			checkRouteAnswer(t, route, answerData(answer))
			return
		}
		var ae *appError
		if !errors.As(err, &ae) {
			t.Fatalf("%s %q: %v (%T) is not an error frame of ours", route, data, err, err)
		}
		we := (*lease.WireError)(nil)
		if !errors.As(lease.FromWire(ae.body), &we) {
			t.Fatalf("%s %q: error data %q is not a WireError", route, data, ae.body)
		}
		want := map[string][]string{
			lease.RouteLeases:  {lease.CodeUnavailable},
			lease.RouteRelease: {lease.CodeUnknownWorker},
			lease.RouteLeave:   {lease.CodeUnknownWorker},
			lease.RouteReport:  {},
			lease.RouteView:    {},
			"ring.nope":        {lease.CodeUnknownRoute},
			"":                 {lease.CodeUnknownRoute},
		}[route]
		if route == lease.RouteRelease || route == lease.RouteLeave {
			// What a commit may answer on a loaded machine: the body was read, the commit did not
			// happen in time or the lead moved.
			want = append(want, lease.CodeUnavailable, lease.CodeNotLeader, lease.CodeNoLeader)
		}
		if wantBad {
			want = []string{lease.CodeBadRequest}
		}
		if !slices.Contains(want, we.Code) {
			t.Fatalf("%s %q answered %q, want one of %v", route, data, ae.body, want)
		}
	})
}

func answerData(p payload.Payload) []byte {
	if p == nil {
		return nil
	}
	return p.Data()
}

// routeBodyDecodes is the model of a route's request decoding: empty data is {}, anything else
// must be the route's JSON object, name SETUP's worker (optional on ring.leases) and, for a
// report, keep within its limits. Routes without a body, and unknown routes, decode anything
// (an unknown route is refused before its body is read).
func routeBodyDecodes(route string, data []byte) bool {
	var body struct {
		lease.Report
		Epoch uint64 `json:"epoch"`
	}
	switch route {
	case lease.RouteLeases, lease.RouteRelease, lease.RouteLeave, lease.RouteReport:
	default:
		return true
	}
	if len(bytes.TrimSpace(data)) > 0 {
		var err error
		switch route {
		case lease.RouteLeases:
			err = json.Unmarshal(data, new(lease.LeasesRequest))
		case lease.RouteRelease:
			err = json.Unmarshal(data, new(lease.ReleaseRequest))
		case lease.RouteLeave:
			err = json.Unmarshal(data, new(lease.LeaveRequest))
		case lease.RouteReport:
			err = json.Unmarshal(data, new(lease.Report))
		}
		if err != nil {
			return false
		}
		_ = json.Unmarshal(data, &body)
	}
	switch {
	case route == lease.RouteLeases:
		return body.WorkerID == "" || body.WorkerID == fuzzWorker.WorkerID
	case body.WorkerID != fuzzWorker.WorkerID:
		return false
	case route == lease.RouteReport:
		return body.Report.Validate() == nil
	}
	return true
}

// checkRouteAnswer checks the data of a successful answer: an ack, or the ring view.
func checkRouteAnswer(t *testing.T, route string, data []byte) {
	t.Helper()
	if route == lease.RouteView {
		var v admin.RingView
		if err := json.Unmarshal(data, &v); err != nil || v.CoordinatorID == "" {
			t.Fatalf("ring.view answered %q (%v)", data, err)
		}
		return
	}
	var ack lease.Ack
	if err := json.Unmarshal(data, &ack); err != nil || !ack.OK {
		t.Fatalf("%s answered %q, want an ack", route, data)
	}
}

// FuzzRingCommand: any ring names and body of a pause, resume or limit call either are refused
// with bad_request (by admin's reading of the body or by the command's checks) or become a command that validates, reads back from the FSM's encoding as the
// same command (the ring committed is the ring named), and applies to an empty state (the trial
// the leader runs before it commits); never a panic.
func FuzzRingCommand(f *testing.F) {
	for _, seed := range fuzzAdminBodies {
		f.Add(seed.action, testRing.Region, testRing.Cluster, testRing.Service, []byte(seed.body))
	}
	f.Add(uint8(0), "eu", "c1", "\x95", []byte(`{}`))
	actions := []string{admin.ActionPause, admin.ActionResume, admin.ActionLimit}
	f.Fuzz(func(t *testing.T, which uint8, region, cluster, service string, body []byte) {
		action := actions[int(which)%len(actions)]
		ring := lease.RingKey{Region: region, Cluster: cluster, Service: service}
		cmd, err := ringCommand(ring, action, body, 1)
		if err != nil {
			if !errors.Is(err, lease.ErrBadRequest) {
				t.Fatalf("%s %q refused with %v, want bad_request", action, body, err)
			}
			return
		}
		enc, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatalf("%s %q: %+v does not encode: %v", action, body, cmd, err)
		}
		back, err := fsm.Decode(enc)
		if err != nil {
			t.Fatalf("%s %q: %q does not decode: %v", action, body, enc, err)
		}
		if !sameControlsCommand(cmd, back) {
			t.Fatalf("%s %q: %+v reads back from %q as %+v", action, body, cmd, enc, back)
		}
		if err := fsm.NewState().Apply(cmd); err != nil {
			t.Fatalf("%s %q: %+v is refused by an empty state: %v", action, body, cmd, err)
		}
	})
}

// sameControlsCommand compares two pause, resume or limit commands field by field (an empty impl
// list and none are the same).
func sameControlsCommand(a, b fsm.Command) bool {
	switch a := a.(type) {
	case *fsm.Pause:
		b, ok := b.(*fsm.Pause)
		return ok && a.Ring == b.Ring && slices.Equal(a.Impl, b.Impl) && a.Reason == b.Reason && a.AtMs == b.AtMs
	case *fsm.Resume:
		b, ok := b.(*fsm.Resume)
		return ok && a.Ring == b.Ring && slices.Equal(a.Impl, b.Impl) && a.AtMs == b.AtMs
	case *fsm.Limit:
		b, ok := b.(*fsm.Limit)
		return ok && *a == *b
	}
	return false
}

// fuzzAdminBodies are admin call bodies from the tests and the docs, and damaged ones; action
// indexes admin.ActionPause, admin.ActionResume, admin.ActionLimit, then the register call.
var fuzzAdminBodies = []struct {
	action uint8
	body   string
}{
	{0, `{"impl":["payment","email"],"reason":"provider down"}`}, {0, ``}, {0, `{}`}, {0, `{"impl":[""]}`},
	{0, `{"impl":["a"],"extra":1}`}, {0, `{"reason":"x"} {}`}, {0, `{"impl":null,"reason":null}`},
	{1, `{"impl":["payment"]}`}, {1, `{}`}, {1, `[]`},
	{2, `{"per_second":120}`}, {2, `{"clear":true}`}, {2, `{"per_second":0}`}, {2, `{"per_second":-1}`},
	{2, `{"per_second":1e308}`}, {2, `{"per_second":1e400}`}, {2, `{"per_second":5,"clear":true}`}, {2, `{"clear":false}`},
	{2, `{"per_second":4.9e-324}`},
	{3, `{"id":"c1","raft_addr":"127.0.0.1:1","rsocket_addr":"127.0.0.1:2","http_addr":"127.0.0.1:3"}`},
	{3, `{"id":"intruder","rsocket_addr":"127.0.0.1:2","http_addr":"127.0.0.1:3"}`}, {3, `{}`}, {3, `{"id":`},
}

// FuzzAdminRequests sends admin calls with any ring names and any body through the real HTTP
// handler of a ready single-node leader: pause, resume, limit (ringCommand is the model:
// bad_request exactly when it refuses, else 200 with the controls as committed) and the
// coordinators' register call (200 only for a node of the Raft configuration). Every answer is
// JSON of the documented shape; a 5xx other than 503 never comes.
func FuzzAdminRequests(f *testing.F) {
	for _, seed := range fuzzAdminBodies {
		f.Add(seed.action, testRing.Region, testRing.Cluster, testRing.Service, []byte(seed.body))
	}
	f.Add(uint8(0), "eu/west", "c 1", "orders%2F", []byte(`{}`))
	f.Add(uint8(1), "", "c1", "s", []byte(`{}`))
	f.Add(uint8(2), strings.Repeat("r", 200), "c1", "s", []byte(`{"clear":true}`))
	c := newCluster(f, 1, func(_ int, cfg *Config) { cfg.Logger = zerolog.Nop() })
	leader := c.leader()
	eventually(f, 30*time.Second, "the leader ready", func() bool { t := leader.currentTerm(); return t != nil && t.isReady() })
	h := leader.httpHandler()
	actions := []string{admin.ActionPause, admin.ActionResume, admin.ActionLimit, "register"}
	f.Fuzz(func(t *testing.T, which uint8, region, cluster, service string, body []byte) {
		action := actions[int(which)%len(actions)]
		ring := lease.RingKey{Region: region, Cluster: cluster, Service: service}
		path := admin.PathRegister
		if action != "register" {
			path = admin.PathRings + url.PathEscape(region) + "/" + url.PathEscape(cluster) + "/" + url.PathEscape(service) + "/" + action
		}
		req, err := http.NewRequest(http.MethodPost, "http://admin"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status, answer := rec.Code, rec.Body.Bytes()
		if status != http.StatusOK {
			we := (*lease.WireError)(nil)
			if err := json.Unmarshal(answer, &we); err != nil || we == nil || we.Code == "" {
				t.Fatalf("%s %q: %d %q is not an error body", path, body, status, answer)
			}
			if status >= 500 && status != http.StatusServiceUnavailable {
				t.Fatalf("%s %q: %d %q", path, body, status, answer)
			}
		}
		if action == "register" {
			checkRegisterAnswer(t, leader, body, status, answer)
			return
		}
		cmd, modelErr := ringCommand(ring, action, body, 1)
		switch {
		case modelErr != nil && status != http.StatusBadRequest:
			t.Fatalf("%s %q: %d %q; the model refuses it: %v", path, body, status, answer, modelErr)
		case modelErr == nil && status != http.StatusOK && status != http.StatusBadRequest && status != http.StatusServiceUnavailable:
			t.Fatalf("%s %q: %d %q; the model accepts %+v", path, body, status, answer, cmd)
		case status != http.StatusOK:
			return
		}
		var got admin.ControlsAnswer
		if err := json.Unmarshal(answer, &got); err != nil || got.Ring != ring || got.LeaderID != leader.cfg.NodeID {
			t.Fatalf("%s %q answered %q (%v)", path, body, answer, err)
		}
		ctl := got.Controls
		switch cmd := cmd.(type) {
		case *fsm.Pause:
			if len(cmd.Impl) == 0 && !ctl.Paused {
				t.Fatalf("%s %q: the ring is not paused: %q", path, body, answer)
			}
			for _, impl := range cmd.Impl {
				if !ctl.Paused && !slices.Contains(ctl.PausedImpl, impl) {
					t.Fatalf("%s %q: %q is not paused: %q", path, body, impl, answer)
				}
			}
		case *fsm.Resume:
			if len(cmd.Impl) == 0 && (ctl.Paused || len(ctl.PausedImpl) > 0) {
				t.Fatalf("%s %q: still paused: %q", path, body, answer)
			}
			for _, impl := range cmd.Impl {
				if slices.Contains(ctl.PausedImpl, impl) {
					t.Fatalf("%s %q: %q is still paused: %q", path, body, impl, answer)
				}
			}
		case *fsm.Limit:
			if cmd.Clear != (ctl.RatePerS == nil) || !cmd.Clear && *ctl.RatePerS != cmd.PerSecond {
				t.Fatalf("%s %q: limit %q", path, body, answer)
			}
		}
	})
}

// checkRegisterAnswer: a registration is committed (200, an ack) only for a node of the Raft
// configuration with both addresses; everything else is refused with bad_request (or, once the
// security work checks the caller, unauthorized).
func checkRegisterAnswer(t *testing.T, n *Node, body []byte, status int, answer []byte) {
	t.Helper()
	var c fsm.Coordinator
	valid := json.Unmarshal(body, &c) == nil && c.ID != "" && c.RSocketAddr != "" && c.HTTPAddr != ""
	switch status {
	case http.StatusOK:
		var ack lease.Ack
		if !valid || !n.inConfiguration(c.ID) || json.Unmarshal(answer, &ack) != nil || !ack.OK {
			t.Fatalf("register %q committed: %q", body, answer)
		}
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusServiceUnavailable:
	default:
		t.Fatalf("register %q: %d %q", body, status, answer)
	}
}
