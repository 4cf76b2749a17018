package main

import (
	"context"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/window"
)

func main() {
	var kit benchkit.Flags
	fs := flag.NewFlagSet("rangescan", flag.ExitOnError)
	kit.Register(fs)
	instances := fs.Int("instances", 300, "instance markers written into the window")
	share := fs.Float64("share", 1.0/3, "share of the ring the lease covers, above 0 and at most 1")
	ks := fs.String("k", "1,2,4,8,16,32", "ranges the share is split into, comma-separated")
	rounds := fs.Int("rounds", 30, "listings per k")
	_ = fs.Parse(os.Args[1:])
	counts, err := parseCounts(*ks)
	if err == nil && !(*share > 0 && *share <= 1) {
		err = fmt.Errorf("-share must be above 0 and at most 1, got %v", *share)
	}
	if err == nil && (*instances < 1 || *rounds < 1) {
		err = fmt.Errorf("-instances and -rounds must be at least 1")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rangescan:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, kit, *instances, *share, counts, *rounds); err != nil {
		benchkit.Fail(err)
	}
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return nil, fmt.Errorf("-k: %q is not a count of ranges", f)
		}
		out = append(out, k)
	}
	return out, nil
}

// spread splits share of the ring into k ranges of equal width, the i-th starting at i/k of the
// ring: disjoint pieces around the ring, as a minimal-mode lease holds them.
func spread(share float64, k int) lease.Ranges {
	ring := new(big.Int).Lsh(big.NewInt(1), 64)
	width, _ := new(big.Float).Mul(new(big.Float).SetInt(ring), big.NewFloat(share/float64(k))).Int(nil)
	if width.Sign() == 0 {
		width.SetInt64(1)
	}
	var out lease.Ranges
	for i := range k {
		start := new(big.Int).Div(new(big.Int).Mul(ring, big.NewInt(int64(i))), big.NewInt(int64(k)))
		start.Sub(start, new(big.Int).Lsh(big.NewInt(1), 63)) // tokens start at -2^63
		end := new(big.Int).Add(start, width)
		end.Sub(end, big.NewInt(1))
		out = append(out, lease.Range{Start: start.Int64(), End: end.Int64()})
	}
	return out
}

type sample struct {
	took  time.Duration
	found int
}

func run(ctx context.Context, kit benchkit.Flags, instances int, share float64, counts []int, rounds int) error {
	s, err := kit.Connect(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	ks, err := benchkit.NewKeyspace(ctx, s, "rangescan")
	if err != nil {
		return err
	}
	defer kit.DropKeyspace(s, ks)
	store, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: benchkit.Ring, WindowMinutes: 1})
	if err != nil {
		return err
	}
	w, err := window.Of(time.Now().Add(-time.Hour), 1)
	if err != nil {
		return err
	}
	for i := range instances {
		if err := store.InsertInstance(ctx, w, fmt.Sprintf("pod-%05d", i)); err != nil {
			return err
		}
	}
	// One listing of everything first: it warms the partition into the caches for every k alike.
	if _, err := store.ListAllInstances(ctx, w, 0); err != nil {
		return err
	}
	samples := map[int][]sample{}
	order := slices.Clone(counts)
	for range rounds {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			rs := spread(share, k)
			start := time.Now()
			found := 0
			for _, rg := range rs { // one query per range, one after the other, as scanWindow
				in, err := store.ListInstances(ctx, w, rg)
				if err != nil {
					return err
				}
				found += len(in)
			}
			samples[k] = append(samples[k], sample{took: time.Since(start), found: found})
		}
	}
	fmt.Printf("\n%d instance markers in one window, a lease of %.1f %% of the ring split into k ranges spread around it; %d listings per k, the k in a new random order each round\n\n",
		instances, share*100, rounds)
	fmt.Println("| k ranges | queries per window | instances found | median | p90 | median vs k = 1 | per extra query (median) |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	base := median(samples[counts[0]])
	for _, k := range counts {
		m := median(samples[k])
		perExtra := "–"
		if k > counts[0] {
			perExtra = ms((m - base) / time.Duration(k-counts[0]))
		}
		fmt.Printf("| %d | %d | %d | %s | %s | %.2f× | %s |\n", k, k, samples[k][0].found, ms(m), ms(pct(samples[k], 90)), float64(m)/float64(base), perExtra)
	}
	return nil
}

func sorted(ss []sample) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = s.took
	}
	slices.Sort(out)
	return out
}

func median(ss []sample) time.Duration { return pct(ss, 50) }

func pct(ss []sample, p int) time.Duration {
	d := sorted(ss)
	return d[min(len(d)-1, len(d)*p/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
