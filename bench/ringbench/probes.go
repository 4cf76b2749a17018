package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/retryring/retryring/bench/leaseprobe/event"
	"github.com/retryring/retryring/internal/proc"
)

// probe is one leaseprobe process and the events read so far from its log (stdout and stderr of
// every launch, appended). Only the driver's goroutine touches it.
type probe struct {
	id string
	p  *proc.Process

	off     int64
	partial []byte
	events  []event.Event
}

// refresh reads what the probe wrote since the last call.
func (pr *probe) refresh() error {
	f, err := os.Open(pr.p.LogPath())
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(pr.off, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("probe %s: %w", pr.id, err)
	}
	pr.off += int64(len(b))
	b = append(pr.partial, b...)
	last := bytes.LastIndexByte(b, '\n')
	if last < 0 {
		pr.partial = b
		return nil
	}
	for _, line := range bytes.Split(b[:last], []byte{'\n'}) {
		if e, ok := event.Parse(line); ok {
			pr.events = append(pr.events, e)
		}
	}
	pr.partial = append([]byte(nil), b[last+1:]...)
	return nil
}

// incarnation is the incarnation of the latest launch that reported its start, "" before any.
func (pr *probe) incarnation() string {
	for i := len(pr.events) - 1; i >= 0; i-- {
		if pr.events[i].Kind == event.Start {
			return pr.events[i].Incarnation
		}
	}
	return ""
}

// leases are the lease records of one incarnation.
func (pr *probe) leases(incarnation string) []leaseRec { return leaseRecs(pr.events, incarnation) }

// find returns the first event of kind of the incarnation at or after from (ns).
func (pr *probe) find(kind, incarnation string, from int64) (event.Event, bool) {
	for _, e := range pr.events {
		if e.Kind == kind && e.Incarnation == incarnation && e.AtNs >= from {
			return e, true
		}
	}
	return event.Event{}, false
}
