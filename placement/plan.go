package placement

import "slices"

// Step is one slot move of a plan.
type Step struct {
	Slot int
	To   string
}

// Rebalance plans the moves that leave every one of names holding
// slots/len(names) slots of m, give or take one: each step takes a slot
// from the shard holding the most (owners absent from names first: a
// shard being drained) to the one holding the fewest, ties by name. Slots
// of a shard are taken from its highest-numbered first, so a plan is
// deterministic.
func Rebalance(m SlotMap, names []string) []Step {
	sorted := slices.Sorted(slices.Values(names))
	if len(sorted) == 0 || m.IsZero() {
		return nil
	}
	owners := slices.Clone(m.Owners)
	held := map[string][]int{}
	for s, o := range owners {
		held[o] = append(held[o], s)
	}
	listed := func(n string) bool { return slices.Contains(sorted, n) }
	var steps []Step
	for {
		// The giver: an unlisted owner with slots, else the listed one
		// with the most.
		giver := ""
		for _, o := range slices.Sorted(func(yield func(string) bool) {
			for o := range held {
				if !yield(o) {
					return
				}
			}
		}) {
			if !listed(o) && len(held[o]) > 0 {
				giver = o
				break
			}
		}
		taker := sorted[0]
		for _, n := range sorted {
			if len(held[n]) < len(held[taker]) {
				taker = n
			}
		}
		if giver == "" {
			giver = sorted[0]
			for _, n := range sorted {
				if len(held[n]) > len(held[giver]) {
					giver = n
				}
			}
			if len(held[giver])-len(held[taker]) <= 1 {
				return steps
			}
		}
		slots := held[giver]
		s := slots[len(slots)-1]
		held[giver] = slots[:len(slots)-1]
		held[taker] = append(held[taker], s)
		steps = append(steps, Step{Slot: s, To: taker})
	}
}

// Drain plans the moves that take every slot off shard, spreading them so
// that the others end balanced: Rebalance over the names without it.
func Drain(m SlotMap, names []string, shard string) []Step {
	return Rebalance(m, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == shard }))
}
