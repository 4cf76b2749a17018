package coordinator

import (
	"fmt"

	"github.com/rsocket/rsocket-go/extension"

	"github.com/retryring/retryring/lease"
)

// routingMIME is the routing extension's MIME type, by name, for entries that spell it out.
var routingMIME = extension.MessageRouting.String()

// routeOf returns the first routing tag inside composite metadata. It parses by hand, checking
// every length against the buffer: rsocket-go's composite metadata scanner indexes without bounds
// checks and panics on truncated input, and a worker's bytes must never crash the coordinator.
func routeOf(metadata []byte) (string, error) {
	for b := metadata; len(b) > 0; {
		var mime string
		head := b[0]
		b = b[1:]
		if head&0x80 != 0 {
			if extension.MIME(head&0x7f) == extension.MessageRouting {
				mime = routingMIME
			}
		} else {
			n := int(head) + 1
			if len(b) < n {
				return "", fmt.Errorf("%w: composite metadata: MIME type of %d bytes truncated", lease.ErrBadRequest, n)
			}
			mime = string(b[:n])
			b = b[n:]
		}
		if len(b) < 3 {
			return "", fmt.Errorf("%w: composite metadata: entry length truncated", lease.ErrBadRequest)
		}
		n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		b = b[3:]
		if len(b) < n {
			return "", fmt.Errorf("%w: composite metadata: entry of %d bytes truncated", lease.ErrBadRequest, n)
		}
		entry := b[:n]
		b = b[n:]
		if mime != routingMIME {
			continue
		}
		if len(entry) == 0 || int(entry[0]) > len(entry)-1 {
			return "", fmt.Errorf("%w: routing metadata: bad tag length", lease.ErrBadRequest)
		}
		return string(entry[1 : 1+int(entry[0])]), nil
	}
	return "", fmt.Errorf("%w: no routing metadata", lease.ErrUnknownRoute)
}
