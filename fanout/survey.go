package fanout

import (
	"context"
	"sync"
	"time"
)

// Answered is one replica's answer to a survey.
type Answered[T any] struct {
	Replica string
	Value   T
	Err     error
	Took    time.Duration
}

// Survey asks every replica of every shard at once — suspect and not-ready
// ones too, since it is how an operator sees them — within timeout, and
// returns the answers indexed [shard][replica] in cluster order (each
// shard's replicas as the set was when the survey started; Answered.Replica
// names each). It is for
// cluster status and schema discovery: it changes no health state and
// moves no fan-out counter.
func Survey[R Replica, T any](ctx context.Context, c *Cluster[R], timeout time.Duration, call Call[R, T]) [][]Answered[T] {
	ctx, span := c.start(ctx, SpanSurvey)
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([][]Answered[T], len(c.shards))
	var wg sync.WaitGroup
	for i, s := range c.shards {
		reps := s.list()
		out[i] = make([]Answered[T], len(reps))
		for j, r := range reps {
			wg.Go(func() {
				a := Answered[T]{Replica: r.r.Addr()}
				t0 := time.Now()
				if err := c.safely("survey", s.name, func() { a.Value, a.Err = call(ctx, r.r) }); err != nil {
					a.Err = err
				}
				a.Took = time.Since(t0)
				out[i][j] = a
			})
		}
	}
	wg.Wait()
	annotateSurvey(span, out)
	return out
}
