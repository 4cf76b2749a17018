package cassandra_test

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/retryring/retryring/cassandra"
)

// cqlString matches a CQL string literal (” is a quote inside one).
var cqlString = regexp.MustCompile(`'((?:[^']|'')*)'`)

// FuzzParseReplication: the --replication flag's text goes into CREATE KEYSPACE as a CQL map
// literal, so whatever ParseReplication accepts must validate and render as a literal whose
// strings are exactly the class and the datacenter names (no name can end the literal and add
// CQL of its own), and its flag form must read back as the same replication. A refusal is
// ErrReplication.
func FuzzParseReplication(f *testing.F) {
	for _, s := range []string{"", "3", "0", "-1", "+2", " 5 ", "dc1=3", "dc1=3,dc2=2", "dc1=3,dc1=1", "dc1=0", "=3", "dc1=",
		"dc'1=3", `dc\1=3`, "dc1=3,", "dc1=3,,dc2=1", "a b=1", "dc1=3}, 'x': 1", "99999999999999999999", "dc1=3=4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := cassandra.ParseReplication(s)
		if err != nil {
			if !errors.Is(err, cassandra.ErrReplication) {
				t.Fatalf("ParseReplication(%q) refused with %v, want ErrReplication", s, err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseReplication(%q) = %+v, which does not validate: %v", s, r, err)
		}
		cql := r.CQL()
		if !strings.HasPrefix(cql, "{") || !strings.HasSuffix(cql, "}") {
			t.Fatalf("ParseReplication(%q): CQL %s", s, cql)
		}
		var strs []string
		for _, m := range cqlString.FindAllStringSubmatch(cql, -1) {
			strs = append(strs, strings.ReplaceAll(m[1], "''", "'"))
		}
		want := []string{"class", "SimpleStrategy", "replication_factor"}
		if len(r.DataCenters) > 0 {
			want = append([]string{"class", "NetworkTopologyStrategy"}, slices.Sorted(maps.Keys(r.DataCenters))...)
		}
		if !slices.Equal(strs, want) {
			t.Fatalf("ParseReplication(%q): CQL %s holds the strings %q, want %q", s, cql, strs, want)
		}
		flag := strconv.Itoa(max(r.Factor, 1))
		if len(r.DataCenters) > 0 {
			var parts []string
			for dc, n := range r.DataCenters {
				parts = append(parts, dc+"="+strconv.Itoa(n))
			}
			sort.Strings(parts)
			flag = strings.Join(parts, ",")
		}
		back, err := cassandra.ParseReplication(flag)
		if err != nil || back.CQL() != cql {
			t.Fatalf("ParseReplication(%q) = %+v; its flag form %q reads %+v, %v", s, r, flag, back, err)
		}
	})
}
