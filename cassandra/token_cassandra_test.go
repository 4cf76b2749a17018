package cassandra_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/storetest"
)

// genIDs makes n distinct non-empty ids of every shape an instance id might take: one
// character, every length around the 16-byte block size, long ones, multi-byte UTF-8 (2, 3 and
// 4 bytes, whose bytes >= 0x80 exercise Cassandra's signed tail), and random bytes made valid.
func genIDs(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && utf8.ValidString(s) && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for c := 0x21; c < 0x7f; c++ {
		add(string(rune(c)))
	}
	for _, c := range []rune{'é', 'ß', '中', '🙂', '\u0080', '\uffff', '\U0010ffff'} {
		add(string(c))
	}
	runes := []rune("abcXYZ019-_.:/éüñ中文日本語🙂🚀\u07ff\u0800")
	for i := 0; len(out) < n; i++ {
		switch i % 4 {
		case 0: // ASCII, lengths 1..40
			b := make([]byte, 1+r.IntN(40))
			for i := range b {
				b[i] = byte(0x20 + r.IntN(0x5f))
			}
			add(string(b))
		case 1: // mixed runes
			var sb strings.Builder
			for range 1 + r.IntN(24) {
				sb.WriteRune(runes[r.IntN(len(runes))])
			}
			add(sb.String())
		case 2: // random bytes turned into valid UTF-8
			b := make([]byte, 1+r.IntN(48))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			add(strings.ToValidUTF8(string(b), "\uFFFD"))
		default: // long ids
			add(strings.Repeat("pod-", 1+r.IntN(60)) + fmt.Sprint(r.IntN(1000)))
		}
	}
	return out[:n]
}

func TestTokenMatchesCassandra(t *testing.T) {
	ctx := ctxT(t)
	s, ks := storetest.Keyspace(t)
	table := ks + ".token_check_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	if err := s.Query("CREATE TABLE IF NOT EXISTS " + table + " (id text PRIMARY KEY)").WithContext(ctx).Exec(); err != nil {
		t.Fatal(err)
	}
	ids := genIDs(10000)
	// Insert concurrently: 10,000 single-partition writes, no multi-partition batches.
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if err := s.Query("INSERT INTO "+table+" (id) VALUES (?)", id).WithContext(ctx).Exec(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}

	iter := s.Query("SELECT id, token(id) FROM " + table).WithContext(ctx).PageSize(5000).Iter()
	sc := iter.Scanner()
	n, bad := 0, 0
	for sc.Next() {
		var id string
		var tok int64
		if err := sc.Scan(&id, &tok); err != nil {
			t.Fatal(err)
		}
		n++
		if got := cassandra.Token(id); got != tok {
			bad++
			if bad <= 10 {
				t.Errorf("Token(%q) = %d, Cassandra token() = %d", id, got, tok)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(ids) {
		t.Fatalf("read back %d ids, wrote %d", n, len(ids))
	}
	if bad > 0 {
		t.Fatalf("%d of %d tokens differ", bad, n)
	}
}
