package minimal_test

import (
	"fmt"
	"time"

	"github.com/retryring/retryring/lease/minimal"
)

// A join takes the newcomer's quarter from the three members (first what is above the upper
// bound 0.275, then from the most loaded down to the lower bound 0.225), a leave reserves, a
// return within the delay moves nothing, and an expiry hands the leaver's share to the least
// loaded, up to the upper bound 0.3667 of three, and w3 (the highest index) takes w1's index.
func ExamplePlanner() {
	p, _ := minimal.NewPlanner(minimal.Config{})
	var a minimal.Assignment
	for _, id := range []string{"w0", "w1", "w2"} {
		a, _, _ = p.Join(a, id)
	}
	for len(a.Members) > 0 {
		var moves []minimal.Move
		if a, moves = p.EvenOut(a); len(moves) == 0 {
			break
		}
	}
	a, moves, _ := p.Join(a, "w3")
	fmt.Printf("join of w3: %d moves\n%v", len(moves), a)

	now := time.Unix(0, 0)
	a, moves, _ = p.Leave(a, "w1", now)
	a, back, _ := p.Join(a, "w1")
	fmt.Printf("restart of w1: %d moves\n", len(moves)+len(back))

	a, _, _ = p.Leave(a, "w1", now)
	a, moves = p.Expire(a, now.Add(p.Config().ReturnDelay))
	fmt.Printf("hand-on of w1: %d moves\n%v", len(moves), a)
	// Output:
	// join of w3: 5 moves
	// 0 w0 0.2250 {[-9223372036854775808,-5072854620270126721]}
	// 1 w1 0.2500 {[3074457345618258602,7686143364045646505]}
	// 2 w2 0.2750 {[-1998397274651868118,3074457345618258601]}
	// 3 w3 0.2500 {[-5072854620270126720,-1998397274651868119] [7686143364045646506,9223372036854775807]}
	// restart of w1: 0 moves
	// hand-on of w1: 3 moves
	// 0 w0 0.3667 {[-9223372036854775808,-5072854620270126721] [5072854620270126634,7686143364045646505]}
	// 1 w3 0.3333 {[-5072854620270126720,-1998397274651868119] [3535625947460997332,5072854620270126633] [7686143364045646506,9223372036854775807]}
	// 2 w2 0.3000 {[-1998397274651868118,3535625947460997331]}
}
