package placement

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
)

// Slot limits. A collection's slot count is fixed when it is created:
// more slots make moves finer (a slot is the unit a move copies and
// fences) at the cost of a larger map and a larger bitmap on every read.
const (
	DefaultSlots = 256
	MinSlots     = 1
	MaxSlots     = 4096
)

// SlotsFingerprint is the placement fingerprint of writes routed by a slot
// map: the shard list no longer decides a document's home, the map does,
// so a changed shard list is not a reshard.
const SlotsFingerprint = "slots"

// ErrSlots wraps every invalid slot count or map.
var ErrSlots = errors.New("invalid slot map")

// ValidSlots reports whether n may be a collection's slot count.
func ValidSlots(n int) error {
	if n < MinSlots || n > MaxSlots {
		return fmt.Errorf("%w: slots %d: want %d..%d", ErrSlots, n, MinSlots, MaxSlots)
	}
	return nil
}

// Slot is id's slot among slots: jump consistent hash of the same FNV-1a
// 64-bit hash of the id that Table.Home uses. Jump rather than a plain
// modulo so that a map of one slot per shard, slot i on the i-th sorted
// name (Legacy), places every id exactly as Table.Home did: collections
// written before slots keep their rows where they are.
func Slot(id string, slots int) int {
	h := fnv.New64a()
	h.Write([]byte(id))
	return Jump(h.Sum64(), slots)
}

// SlotMap says which shard holds each slot of a collection. Epoch orders
// maps: every change of an owner makes a new map with a higher epoch, and
// Since records, per slot, the epoch at which its owner last changed.
//
// Version is raised by every change of the map, a move's steps too; Moves
// are the slot moves under way (at most one, see Begin).
type SlotMap struct {
	Epoch   uint64
	Owners  []string // slot → shard name
	Since   []uint64 // slot → epoch of its owner's last change
	Version uint64
	Moves   map[int]SlotMove
}

// SlotMove is a slot on its way to another shard. Before the flip To is
// set: the owner refuses writes to the slot (it is fenced) while its rows
// are copied to To, which takes them. After the flip To is empty and Prev
// names the old owner, which still holds the rows until the map settles.
type SlotMove struct {
	To   string
	Prev string
}

// Ver is the map's version: Version, or for a map written before moves
// its epoch.
func (m SlotMap) Ver() uint64 { return max(m.Version, m.Epoch) }

// Fenced reports whether slot s is being copied away from its owner, who
// takes no writes to it until the flip.
func (m SlotMap) Fenced(s int) bool { return m.Moves[s].To != "" }

// HoldsRows reports whether shard holds rows of slot s under m: it owns
// it, it is receiving it, or it owned it before a flip the map has not
// settled yet.
func (m SlotMap) HoldsRows(shard string, s int) bool {
	mv := m.Moves[s]
	return m.Owners[s] == shard || mv.To == shard || mv.Prev == shard
}

// ErrMoving is Begin's refusal while another move is under way.
var ErrMoving = errors.New("a slot move is under way")

// Begin starts moving slot s to shard to: the next version, s fenced.
// One slot is fenced at a time a collection. Slots flipped earlier may
// still await their settle (their old owners keep their rows for a
// grace): they are not fenced, and take writes at their new owners.
func (m SlotMap) Begin(s int, to string) (SlotMap, error) {
	if s < 0 || s >= len(m.Owners) {
		return m, fmt.Errorf("%w: slot %d of %d", ErrSlots, s, len(m.Owners))
	}
	if _, moving := m.Moves[s]; moving || m.fenced() {
		return m, ErrMoving
	}
	if m.Owners[s] == to {
		return m, fmt.Errorf("%w: slot %d is on %s already", ErrSlots, s, to)
	}
	out := m.Clone()
	out.Version = m.Ver() + 1
	if out.Moves == nil {
		out.Moves = map[int]SlotMove{}
	}
	out.Moves[s] = SlotMove{To: to}
	return out, nil
}

// fenced reports whether any slot is fenced for a move.
func (m SlotMap) fenced() bool {
	for _, mv := range m.Moves {
		if mv.To != "" {
			return true
		}
	}
	return false
}

// Flip gives the slot being moved to its new owner at the next epoch;
// the old owner keeps its rows (Prev) until Settle. Other slots' pending
// settles stay as they are.
func (m SlotMap) Flip(s int) SlotMap {
	out := m.Move(s, m.Moves[s].To)
	out.Version = m.Ver() + 1
	out.Moves[s] = SlotMove{Prev: m.Owners[s]}
	return out
}

// Settle ends slot s's move, done or abandoned: whoever held its rows
// only for the move (the old owner after a flip, the receiver before
// one) drops them when it applies the settled map.
func (m SlotMap) Settle(s int) SlotMap {
	out := m.Clone()
	out.Version = m.Ver() + 1
	delete(out.Moves, s)
	return out
}

// Slots is the map's slot count (0 for the zero map: a collection that
// predates slots).
func (m SlotMap) Slots() int { return len(m.Owners) }

// IsZero reports whether m is no map at all.
func (m SlotMap) IsZero() bool { return len(m.Owners) == 0 }

// Home is the shard that holds id under m.
func (m SlotMap) Home(id string) string { return m.Owners[Slot(id, len(m.Owners))] }

// Held is the slots m gives to shard, as a bitmap (bit s of byte s/8).
func (m SlotMap) Held(shard string) []byte {
	b := make([]byte, (len(m.Owners)+7)/8)
	for s, o := range m.Owners {
		if o == shard {
			b[s/8] |= 1 << (s % 8)
		}
	}
	return b
}

// Counts is how many slots each of names holds under m (names absent
// from m count 0).
func (m SlotMap) Counts(names []string) map[string]int {
	out := make(map[string]int, len(names))
	for _, n := range names {
		out[n] = 0
	}
	for _, o := range m.Owners {
		out[o]++
	}
	return out
}

// Clone is a deep copy of m.
func (m SlotMap) Clone() SlotMap {
	out := SlotMap{Epoch: m.Epoch, Owners: slices.Clone(m.Owners), Since: slices.Clone(m.Since), Version: m.Version}
	if len(m.Moves) > 0 {
		out.Moves = maps.Clone(m.Moves)
	}
	return out
}

// Validate checks that m is a whole map: a valid slot count, one epoch per
// slot, none after the map's own, every slot owned.
func (m SlotMap) Validate() error {
	if err := ValidSlots(len(m.Owners)); err != nil {
		return err
	}
	if len(m.Since) != len(m.Owners) {
		return fmt.Errorf("%w: %d owners but %d epochs", ErrSlots, len(m.Owners), len(m.Since))
	}
	for s, o := range m.Owners {
		if o == "" {
			return fmt.Errorf("%w: slot %d has no owner", ErrSlots, s)
		}
		if m.Since[s] > m.Epoch {
			return fmt.Errorf("%w: slot %d changed at epoch %d, after the map's %d", ErrSlots, s, m.Since[s], m.Epoch)
		}
	}
	for s, mv := range m.Moves {
		if s < 0 || s >= len(m.Owners) || (mv.To == "") == (mv.Prev == "") {
			return fmt.Errorf("%w: move of slot %d: want one of to or prev", ErrSlots, s)
		}
	}
	return nil
}

// Even is a new collection's map at epoch 1: slots dealt out over the
// sorted names in turn, so every shard holds slots/len(names) of them,
// give or take one.
func Even(names []string, slots int) SlotMap {
	sorted := slices.Sorted(slices.Values(names))
	m := SlotMap{Epoch: 1, Owners: make([]string, slots), Since: make([]uint64, slots)}
	for s := range slots {
		m.Owners[s] = sorted[s%len(sorted)]
		m.Since[s] = 1
	}
	return m
}

// Legacy is the map that reproduces Table.Home over names exactly: one
// slot per shard, slot i on the i-th sorted name (Slot uses the same jump
// hash of the same id hash). Collections written before slots get it.
func Legacy(names []string) SlotMap {
	sorted := slices.Sorted(slices.Values(names))
	return SlotMap{Epoch: 1, Owners: sorted, Since: slices.Repeat([]uint64{1}, len(sorted))}
}

// Move is the map after slot moves to shard: one epoch later, the slot's
// Since set to it.
func (m SlotMap) Move(slot int, shard string) SlotMap {
	out := m.Clone()
	out.Version = m.Ver() + 1
	out.Epoch++
	out.Owners[slot] = shard
	out.Since[slot] = out.Epoch
	return out
}

// HeldBit reports whether bitmap b (as Held makes it) has slot s.
func HeldBit(b []byte, s int) bool { return s/8 < len(b) && b[s/8]&(1<<(s%8)) != 0 }
