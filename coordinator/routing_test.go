package coordinator

import (
	"errors"
	"testing"

	"github.com/rsocket/rsocket-go/extension"

	"github.com/retryring/retryring/lease"
)

func TestRouteOf(t *testing.T) {
	tags, _ := extension.EncodeRouting(lease.RouteLeases)
	byName, _ := extension.NewCompositeMetadataBuilder().
		PushString("text/plain", "x").
		Push("message/x.rsocket.routing.v0", tags).
		Build()
	for name, md := range map[string][]byte{"well-known id": composite(lease.RouteLeases), "after another entry, by name": byName} {
		if route, err := routeOf(md); err != nil || route != lease.RouteLeases {
			t.Errorf("%s: %q %v", name, route, err)
		}
	}
	for name, tc := range map[string]struct {
		md   []byte
		want error
	}{
		"empty":                  {nil, lease.ErrUnknownRoute},
		"no routing entry":       {mustBuild(extension.NewCompositeMetadataBuilder().PushString("text/plain", "x")), lease.ErrUnknownRoute},
		"length past the end":    {[]byte{0xfe, 0, 0, 9, 1}, lease.ErrBadRequest},
		"mime name past the end": {[]byte{0x20, 'a'}, lease.ErrBadRequest},
		"tag longer than entry":  {[]byte{0xfe, 0, 0, 2, 5, 'a'}, lease.ErrBadRequest},
		"empty routing entry":    {[]byte{0xfe, 0, 0, 0}, lease.ErrBadRequest},
		"length header cut":      {[]byte{0xfe, 0}, lease.ErrBadRequest},
	} {
		if _, err := routeOf(tc.md); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

func mustBuild(b *extension.CompositeMetadataBuilder) []byte {
	md, err := b.Build()
	if err != nil {
		panic(err)
	}
	return md
}
