package budget

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	ms := time.Millisecond
	plain := Config{}
	tls := Config{TLS: true}
	for _, tc := range []struct {
		name   string
		cfg    Config
		raw    []string
		want   Budget
		errMsg string
	}{
		// Field report 002: 50 ms left a 45 ms shard budget, just under a cold TLS hop.
		{name: "plaintext default", cfg: plain, want: Budget{50 * ms, 45 * ms}},
		{name: "tls default covers a cold hop", cfg: tls, want: Budget{250 * ms, 245 * ms}},
		{name: "explicit wins over tls default, downwards", cfg: tls, raw: []string{"50"}, want: Budget{50 * ms, 45 * ms}},
		{name: "explicit wins over plaintext default, upwards", cfg: plain, raw: []string{"1000"}, want: Budget{1000 * ms, 995 * ms}},
		{name: "report sweep 250", cfg: plain, raw: []string{"250"}, want: Budget{250 * ms, 245 * ms}},
		{name: "one ms keeps a 1 ms shard floor", cfg: plain, raw: []string{"1"}, want: Budget{1 * ms, 1 * ms}},
		{name: "five ms keeps the floor", cfg: plain, raw: []string{"5"}, want: Budget{5 * ms, 1 * ms}},
		{name: "six ms", cfg: plain, raw: []string{"6"}, want: Budget{6 * ms, 1 * ms}},
		{name: "at max", cfg: plain, raw: []string{"10000"}, want: Budget{10 * time.Second, 10*time.Second - 5*ms}},
		{name: "above max clamps", cfg: plain, raw: []string{"10001"}, want: Budget{10 * time.Second, 10*time.Second - 5*ms}},
		{name: "huge clamps", cfg: plain, raw: []string{"999999999999999999999999999"}, want: Budget{10 * time.Second, 10*time.Second - 5*ms}},
		{name: "custom max", cfg: Config{Max: 2 * time.Second}, raw: []string{"5000"}, want: Budget{2 * time.Second, 2*time.Second - 5*ms}},
		{name: "custom max below tls default caps default", cfg: Config{TLS: true, Max: 100 * ms}, want: Budget{100 * ms, 95 * ms}},
		{name: "configured default replaces plaintext's", cfg: Config{Fallback: 400 * ms}, want: Budget{400 * ms, 395 * ms}},
		{name: "configured default replaces tls's", cfg: Config{TLS: true, Fallback: 80 * ms}, want: Budget{80 * ms, 75 * ms}},
		{name: "explicit wins over a configured default", cfg: Config{Fallback: 400 * ms}, raw: []string{"60"}, want: Budget{60 * ms, 55 * ms}},
		{name: "max caps a configured default", cfg: Config{Fallback: 3 * time.Second, Max: time.Second}, want: Budget{time.Second, 995 * ms}},
		{name: "leading zeros", cfg: plain, raw: []string{"0100"}, want: Budget{100 * ms, 95 * ms}},
		{name: "zero", cfg: plain, raw: []string{"0"}, errMsg: `invalid deadline_ms: "0"`},
		{name: "negative", cfg: plain, raw: []string{"-5"}, errMsg: "not an integer"},
		{name: "plus sign", cfg: plain, raw: []string{"+5"}, errMsg: "not an integer"},
		{name: "fraction", cfg: plain, raw: []string{"1.5"}, errMsg: "not an integer"},
		{name: "unit", cfg: plain, raw: []string{"50ms"}, errMsg: "not an integer"},
		{name: "space", cfg: plain, raw: []string{" 50"}, errMsg: "not an integer"},
		{name: "empty", cfg: plain, raw: []string{""}, errMsg: "empty"},
		{name: "twice", cfg: plain, raw: []string{"50", "60"}, errMsg: "given 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.cfg, tc.raw)
			if tc.errMsg != "" {
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorContains(t, err, tc.errMsg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "0", "1", "50", "10000", "99999999999999999999", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := Resolve(Config{TLS: len(s)%2 == 0}, []string{s})
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		require.GreaterOrEqual(t, b.Deadline, time.Millisecond)
		require.LessOrEqual(t, b.Deadline, DefaultMax)
		require.GreaterOrEqual(t, b.Shard, MinShard)
		require.Less(t, b.Shard, b.Deadline+time.Millisecond)
	})
}

func TestResolveTimeout(t *testing.T) {
	c := Config{Max: 2 * time.Second}
	for _, tc := range []struct {
		name           string
		deadline, secs []string
		want           time.Duration
		err            error
	}{
		{name: "neither: the default", want: DefaultPlaintext},
		{name: "seconds", secs: []string{"1"}, want: time.Second},
		{name: "clamped to the max", secs: []string{"30"}, want: 2 * time.Second},
		{name: "huge clamped", secs: []string{"99999999999999999999"}, want: 2 * time.Second},
		{name: "deadline_ms wins", deadline: []string{"120"}, secs: []string{"1"}, want: 120 * time.Millisecond},
		{name: "zero", secs: []string{"0"}, err: ErrInvalidTimeout},
		{name: "fraction", secs: []string{"0.5"}, err: ErrInvalidTimeout},
		{name: "twice", secs: []string{"1", "2"}, err: ErrInvalidTimeout},
		{name: "bad deadline_ms still refused", deadline: []string{"x"}, secs: []string{"1"}, err: ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ResolveTimeout(c, tc.deadline, tc.secs)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, b.Deadline)
		})
	}
}

func TestForRemaining(t *testing.T) {
	for _, tc := range []struct {
		cfg        Config
		left       time.Duration
		want, shrd time.Duration
	}{
		{Config{}, 200 * time.Millisecond, 200 * time.Millisecond, 195 * time.Millisecond},
		{Config{}, time.Hour, DefaultMax, DefaultMax - NetworkOverhead},
		{Config{Max: 300 * time.Millisecond}, time.Second, 300 * time.Millisecond, 295 * time.Millisecond},
		{Config{}, 3 * time.Millisecond, 3 * time.Millisecond, MinShard},
	} {
		b := ForRemaining(tc.cfg, tc.left)
		if b.Deadline != tc.want || b.Shard != tc.shrd {
			t.Errorf("ForRemaining(%v, %v) = %+v, want deadline %v shard %v", tc.cfg, tc.left, b, tc.want, tc.shrd)
		}
	}
}
