package catalog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/trawl-search/trawl/vector"
)

// Limits of a collection's settings (DESIGN.md, "Collections").
const (
	MinDim     = 1
	MaxDim     = 8192
	MaxNameLen = 64
	// DefaultDim is a create's dimension when it names none.
	DefaultDim = vector.DefaultDim
)

// Quantizations and indexes a collection may be created with.
const (
	QuantNone = "none"
	QuantInt8 = "int8"
	IndexFlat = "flat"
	IndexIVF  = "ivf"
)

// Where a collection's float32 rows live on each replica: on disk, in
// memory-mapped segment files read through the page cache, or in the Go
// heap. Either way the int8 codes, IVF lists, ids and payload indexes
// are in memory, and the raft log and snapshots are what is durable.
const (
	Float32OnDisk   = "on_disk"
	Float32InMemory = "in_memory"
)

// ErrInvalid wraps every validation failure of this package.
var ErrInvalid = errors.New("invalid collection")

// Settings are a collection's, fixed at creation but for what Changeable
// allows to change online (the quantization of a flat collection).
type Settings struct {
	Dim    int
	Metric vector.Metric
	// Quantization is QuantNone or QuantInt8; Index is IndexFlat or
	// IndexIVF (which implies QuantInt8).
	Quantization string
	Index        string
	// Float32 is Float32OnDisk or Float32InMemory.
	Float32 string
	// Sparse are the named sparse vectors (Qdrant's sparse_vectors), nil
	// when there are none. Settings hold a map, so compare them with
	// Equal.
	Sparse map[string]Sparse
	// Named are the named dense vectors (Qdrant's vectors as a map), nil
	// when there are none. A collection has either the unnamed vector
	// (Dim > 0) or named ones (Dim 0, Named non-empty), never both, as
	// Qdrant's vectors config is one or the other.
	Named map[string]Dense
}

// Dense are one named dense vector's settings.
type Dense struct {
	Dim    int
	Metric vector.Metric
	// Quantization is QuantNone or QuantInt8. A named vector's rows are
	// float32 in memory and always scanned exactly: int8 is recorded (a
	// create states it, a get shows it) but keeps no codes.
	Quantization string
}

// MaxNamedVectors bounds a collection's named dense vectors.
const MaxNamedVectors = 16

// HasUnnamed reports whether the collection holds the unnamed vector;
// one with only named vectors has Dim 0.
func (s Settings) HasUnnamed() bool { return s.Dim > 0 }

// Sparse are one named sparse vector's settings.
type Sparse struct {
	// Modifier is ModifierNone or ModifierIDF: whether a query's values
	// are weighed by each term's inverse document frequency over the
	// whole collection.
	Modifier string
}

// Sparse vector modifiers (Qdrant's).
const (
	ModifierNone = "none"
	ModifierIDF  = "idf"
)

// MaxSparseVectors bounds a collection's named sparse vectors.
const MaxSparseVectors = 16

// Equal reports whether s and o are the same settings.
func (s Settings) Equal(o Settings) bool {
	return s.Dim == o.Dim && s.Metric == o.Metric && s.Quantization == o.Quantization && s.Index == o.Index &&
		s.Float32 == o.Float32 && maps.Equal(s.Sparse, o.Sparse) && maps.Equal(s.Named, o.Named)
}

// IsZero reports whether s is the zero Settings.
func (s Settings) IsZero() bool { return s.Equal(Settings{}) }

// Defaults is a create's settings where it names none: 1536-D cosine,
// float32 only (in memory), flat.
func Defaults() Settings {
	return Settings{Dim: DefaultDim, Metric: vector.Cosine, Quantization: QuantNone, Index: IndexFlat, Float32: Float32InMemory}
}

// Normalize fills unset fields with their defaults and applies the one
// implication (ivf keeps int8 codes), so two creates that mean the same
// compare equal.
func (s Settings) Normalize() Settings {
	if len(s.Named) == 0 {
		s.Named = nil
		if s.Dim == 0 {
			s.Dim = DefaultDim
		}
	} else {
		named := make(map[string]Dense, len(s.Named))
		for name, d := range s.Named {
			if d.Quantization == "" {
				d.Quantization = QuantNone
			}
			named[name] = d
		}
		s.Named = named
		if s.Dim == 0 {
			// No unnamed vector: nothing of its settings applies, so
			// they take the one value that means nothing is kept.
			s.Metric, s.Quantization, s.Index, s.Float32 = vector.Cosine, QuantNone, IndexFlat, Float32InMemory
		}
	}
	if s.Quantization == "" {
		s.Quantization = QuantNone
	}
	if s.Index == "" {
		s.Index = IndexFlat
	}
	if s.Index == IndexIVF {
		s.Quantization = QuantInt8
	}
	if s.Float32 == "" {
		s.Float32 = DefaultFloat32(s.Quantization)
	}
	if len(s.Sparse) == 0 {
		s.Sparse = nil
	} else {
		sp := make(map[string]Sparse, len(s.Sparse))
		for name, v := range s.Sparse {
			if v.Modifier == "" {
				v.Modifier = ModifierNone
			}
			sp[name] = v
		}
		s.Sparse = sp
	}
	return s
}

// DefaultFloat32 is where a collection's float32 rows live when its
// create names no place: on disk when int8 codes answer its queries (the
// float32 rows are read only to re-score a few candidates a query, and
// by exact queries), in memory when every query scans them.
func DefaultFloat32(quantization string) string {
	if quantization == QuantInt8 {
		return Float32OnDisk
	}
	return Float32InMemory
}

// Validate reports the first setting out of range, naming it.
func (s Settings) Validate() error {
	if err := s.validateNamed(); err != nil {
		return err
	}
	if s.Dim == 0 && len(s.Named) > 0 {
		return s.validateSparse()
	}
	if s.Dim < MinDim || s.Dim > MaxDim {
		return fmt.Errorf("%w: dimension %d: want %d..%d", ErrInvalid, s.Dim, MinDim, MaxDim)
	}
	switch s.Metric {
	case vector.Cosine, vector.DotProduct, vector.Euclidean:
	default:
		return fmt.Errorf("%w: unknown metric %v", ErrInvalid, s.Metric)
	}
	if s.Quantization != QuantNone && s.Quantization != QuantInt8 {
		return fmt.Errorf("%w: quantization %q: want %s or %s", ErrInvalid, s.Quantization, QuantNone, QuantInt8)
	}
	if s.Index != IndexFlat && s.Index != IndexIVF {
		return fmt.Errorf("%w: index %q: want %s or %s", ErrInvalid, s.Index, IndexFlat, IndexIVF)
	}
	if s.Float32 != Float32OnDisk && s.Float32 != Float32InMemory {
		return fmt.Errorf("%w: float32 %q: want %s or %s", ErrInvalid, s.Float32, Float32OnDisk, Float32InMemory)
	}
	return s.validateSparse()
}

// validateSparse checks the sparse vectors' settings.
func (s Settings) validateSparse() error {
	if len(s.Sparse) > MaxSparseVectors {
		return fmt.Errorf("%w: sparse_vectors: %d vectors, at most %d", ErrInvalid, len(s.Sparse), MaxSparseVectors)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Sparse)) {
		if err := ValidName(name); err != nil {
			return fmt.Errorf("%w: sparse_vectors: vector name %q: want 1..%d characters of [A-Za-z0-9_.-]", ErrInvalid, name, MaxNameLen)
		}
		if m := s.Sparse[name].Modifier; m != ModifierNone && m != ModifierIDF {
			return fmt.Errorf("%w: sparse_vectors.%s.modifier %q: want %s or %s", ErrInvalid, name, m, ModifierNone, ModifierIDF)
		}
	}
	return nil
}

// validateNamed checks the named dense vectors' settings: a collection
// has them or the unnamed vector, and no name is also a sparse vector's.
func (s Settings) validateNamed() error {
	if len(s.Named) == 0 {
		return nil
	}
	if s.Dim != 0 {
		return fmt.Errorf("%w: vectors: a collection has either one unnamed vector or named ones, not both", ErrInvalid)
	}
	if len(s.Named) > MaxNamedVectors {
		return fmt.Errorf("%w: vectors: %d named vectors, at most %d", ErrInvalid, len(s.Named), MaxNamedVectors)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Named)) {
		if err := ValidName(name); err != nil {
			return fmt.Errorf("%w: vectors: vector name %q: want 1..%d characters of [A-Za-z0-9_.-]", ErrInvalid, name, MaxNameLen)
		}
		if _, ok := s.Sparse[name]; ok {
			return fmt.Errorf("%w: vectors.%s: the name is also a sparse vector's", ErrInvalid, name)
		}
		d := s.Named[name]
		if d.Dim < MinDim || d.Dim > MaxDim {
			return fmt.Errorf("%w: vectors.%s.size %d: want %d..%d", ErrInvalid, name, d.Dim, MinDim, MaxDim)
		}
		switch d.Metric {
		case vector.Cosine, vector.DotProduct, vector.Euclidean:
		default:
			return fmt.Errorf("%w: vectors.%s: unknown metric %v", ErrInvalid, name, d.Metric)
		}
		if d.Quantization != QuantNone && d.Quantization != QuantInt8 {
			return fmt.Errorf("%w: vectors.%s.quantization %q: want %s or %s", ErrInvalid, name, d.Quantization, QuantNone, QuantInt8)
		}
	}
	return nil
}

// String is the --ensure-collection form without the name:
// DIM:METRIC:QUANTIZATION:INDEX:FLOAT32.
// Sparse vectors, which that form cannot name, follow as
// " sparse=NAME:MODIFIER,...".
func (s Settings) String() string {
	out := fmt.Sprintf("%d:%s:%s:%s:%s", s.Dim, s.Metric, s.Quantization, s.Index, s.Float32)
	if len(s.Sparse) > 0 {
		parts := make([]string, 0, len(s.Sparse))
		for _, name := range slices.Sorted(maps.Keys(s.Sparse)) {
			parts = append(parts, name+":"+s.Sparse[name].Modifier)
		}
		out += " sparse=" + strings.Join(parts, ",")
	}
	if len(s.Named) > 0 {
		parts := make([]string, 0, len(s.Named))
		for _, name := range slices.Sorted(maps.Keys(s.Named)) {
			d := s.Named[name]
			parts = append(parts, fmt.Sprintf("%s:%d:%s:%s", name, d.Dim, d.Metric, d.Quantization))
		}
		out += " named=" + strings.Join(parts, ",")
	}
	return out
}

// ValidName reports whether name may name a collection or an alias:
// 1..64 characters of [A-Za-z0-9_.-].
func ValidName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: name %q: want 1..%d characters", ErrInvalid, name, MaxNameLen)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-'
		if !ok {
			return fmt.Errorf("%w: name %q: only letters, digits, '_', '.' and '-' are allowed", ErrInvalid, name)
		}
	}
	return nil
}

// Spec is one --ensure-collection value.
type Spec struct {
	Name     string
	Settings Settings
}

// ParseSpec reads NAME=DIM:METRIC[:QUANTIZATION[:INDEX[:FLOAT32]]].
func ParseSpec(v string) (Spec, error) {
	name, rest, ok := strings.Cut(v, "=")
	if !ok {
		return Spec{}, fmt.Errorf("%w: %q: want NAME=DIM:METRIC[:QUANTIZATION[:INDEX[:FLOAT32]]]", ErrInvalid, v)
	}
	if err := ValidName(name); err != nil {
		return Spec{}, err
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 5 {
		return Spec{}, fmt.Errorf("%w: %q: want NAME=DIM:METRIC[:QUANTIZATION[:INDEX[:FLOAT32]]]", ErrInvalid, v)
	}
	dim, err := strconv.Atoi(parts[0])
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %q: dimension %q is not a number", ErrInvalid, v, parts[0])
	}
	m, err := vector.ParseMetric(parts[1])
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %q: %v", ErrInvalid, v, err)
	}
	if dim < MinDim || dim > MaxDim {
		return Spec{}, fmt.Errorf("%w: %q: dimension %d: want %d..%d", ErrInvalid, v, dim, MinDim, MaxDim)
	}
	s := Settings{Dim: dim, Metric: m}
	if len(parts) > 2 {
		s.Quantization = parts[2]
	}
	if len(parts) > 3 {
		s.Index = parts[3]
	}
	if len(parts) > 4 {
		s.Float32 = parts[4]
	}
	s = s.Normalize()
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return Spec{Name: name, Settings: s}, nil
}

// Changeable reports, naming each, the settings of to that differ from
// from and cannot change online: only the quantization of a flat
// collection can (its int8 codes are made from the float32 rows it keeps,
// or dropped). Dimension and metric would change every stored row's
// meaning, an IVF index is made of int8 codes, and where the float32 rows
// live is fixed while the replica's store holds them.
func Changeable(from, to Settings) error {
	// An ivf index implies int8 (Normalize), so ask before normalizing.
	ivfOff := to.Quantization == QuantNone && (from.Index == IndexIVF || to.Index == IndexIVF)
	from, to = from.Normalize(), to.Normalize()
	var fixed []string
	if from.Dim != to.Dim {
		fixed = append(fixed, fmt.Sprintf("dimension (%d, asked %d)", from.Dim, to.Dim))
	}
	if from.Metric != to.Metric {
		fixed = append(fixed, fmt.Sprintf("metric (%s, asked %s)", from.Metric, to.Metric))
	}
	if from.Index != to.Index {
		fixed = append(fixed, fmt.Sprintf("index (%s, asked %s)", from.Index, to.Index))
	} else if ivfOff {
		fixed = append(fixed, "quantization (an ivf index keeps int8 codes)")
	}
	if from.Float32 != to.Float32 {
		fixed = append(fixed, fmt.Sprintf("float32 placement (%s, asked %s)", from.Float32, to.Float32))
	}
	if !maps.Equal(from.Sparse, to.Sparse) {
		fixed = append(fixed, "sparse_vectors")
	}
	if !maps.Equal(from.Named, to.Named) {
		fixed = append(fixed, "named vectors")
	}
	if len(fixed) > 0 {
		return fmt.Errorf("%w: cannot change online: %s", ErrInvalid, strings.Join(fixed, ", "))
	}
	return nil
}
