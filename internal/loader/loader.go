package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The router's limits on POST /v1/vectors (DESIGN.md, "Writes"). They are
// written out rather than imported from package api, so a client carries
// no server code; a test holds them equal to api's.
const (
	// MaxBatch is the most vectors one POST /v1/vectors takes.
	MaxBatch = 256
	// maxBodyBytes is the largest request body the router reads.
	maxBodyBytes = 8 << 20
	// maxIDBytes is the longest id it takes.
	maxIDBytes = 256
)

// Defaults and bounds of Config, also the flags' of `router load`.
const (
	// DefaultBatch is the router's own limit: fewer requests, each
	// amortising its raft commit over more vectors.
	DefaultBatch = MaxBatch
	// DefaultConcurrency keeps every shard's leader busy on a small
	// cluster without queueing behind the router's admission limit.
	DefaultConcurrency = 4
	// MaxConcurrency: more batches in flight than this only wait in the
	// router's admission queue (or are refused with 429).
	MaxConcurrency = 64
	// DefaultMaxAttempts gives a leader election (about a second, answered
	// 503 with Retry-After: 1) room to finish several times over.
	DefaultMaxAttempts = 10
	// DefaultRequestTimeout is well past the router's 5 s write timeout
	// plus its 10 s body timeout: a request that takes longer is lost.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultProgressEvery is how often plain progress lines are printed
	// (and at each tenth of the input).
	DefaultProgressEvery = 2 * time.Second
)

// Config is one load.
type Config struct {
	// Router is the router's base URL, http:// or https://.
	Router string
	// Collection, when set, is the collection the records go to (POST
	// /v1/collections/{Collection}/vectors); empty: the router's default
	// collection (POST /v1/vectors).
	Collection string
	// Client sends the requests (NewClient); nil is http.DefaultClient.
	Client *http.Client
	// APIKey, when set, is sent as Authorization: Bearer.
	APIKey string
	// Batch is the most records a request carries, 1..MaxBatch; 0 is
	// DefaultBatch.
	Batch int
	// Concurrency is how many requests are in flight at once,
	// 1..MaxConcurrency; 0 is DefaultConcurrency.
	Concurrency int
	// Rate caps the records sent a second (0: as fast as the cluster
	// takes them). A bulk load at full speed takes the CPU searches need;
	// a rate leaves them room, as Elasticsearch's requests_per_second
	// does for a reindex.
	Rate float64
	// ResumeFrom skips the input's first records (an earlier run's
	// acknowledged prefix).
	ResumeFrom int64
	// MaxAttempts bounds the sends of one batch; 0 is DefaultMaxAttempts.
	MaxAttempts int
	// RequestTimeout bounds one request; 0 is DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Out receives progress and the summary; nil discards them.
	Out io.Writer
	// Terminal draws a progress bar on Out instead of plain lines.
	Terminal bool
	// ProgressEvery spaces plain progress lines; 0 is DefaultProgressEvery.
	ProgressEvery time.Duration
	// Clock is the time the load runs on; nil is the real one.
	Clock Clock
	// Logger receives retries; nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	u, err := url.Parse(c.Router)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("--router %q: want http://HOST:PORT or https://HOST:PORT", c.Router)
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		return c, fmt.Errorf("--batch %d: want 1..%d (the most POST /v1/vectors takes)", c.Batch, MaxBatch)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		return c, fmt.Errorf("--concurrency %d: want 1..%d", c.Concurrency, MaxConcurrency)
	}
	if c.Rate < 0 {
		return c, fmt.Errorf("--rate %g: want records a second, 0 (no cap) or more", c.Rate)
	}
	if c.ResumeFrom < 0 {
		return c, fmt.Errorf("--resume-from %d: want a record count, 0 or more", c.ResumeFrom)
	}
	if c.Client == nil {
		c.Client = http.DefaultClient
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// vectorsURL is the upsert endpoint of collection (the default
// collection's when empty) on router.
func vectorsURL(router, collection string) string {
	base := strings.TrimRight(router, "/")
	if collection == "" {
		return base + "/v1/vectors"
	}
	return base + "/v1/collections/" + url.PathEscape(collection) + "/vectors"
}

type loader struct {
	cfg Config
	url string
	t   *tracker
	// maxBody is the largest request body the router reads: a batch is cut
	// short of its count when its records would not fit (payloads of up
	// to 64 KiB each can make 256 records too many).
	maxBody int
}

// Run loads src through the router, writes progress and then a Summary to
// cfg.Out, and returns the summary. It stops at the end of the input, at
// a fatal error (a *FatalError, or the input's own), or when ctx is done;
// either way only after the batches in flight have been answered, so the
// summary's Resume is exact. The error is nil only when every record was
// acknowledged.
func Run(ctx context.Context, src Source, cfg Config) (Summary, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Summary{}, err
	}
	if err := src.Skip(cfg.ResumeFrom); err != nil {
		return Summary{}, fmt.Errorf("--resume-from %d: %w", cfg.ResumeFrom, err)
	}
	l := &loader{
		cfg: cfg,
		url: vectorsURL(cfg.Router, cfg.Collection),
		t:   newTracker(cfg, src.Total()),

		maxBody: maxBodyBytes,
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	batches := make(chan *batch)
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for b := range batches {
				if err := l.send(runCtx, b); err != nil {
					stop(err) // the first cause wins; the rest are the same story
				}
			}
		})
	}
	stopNotice := context.AfterFunc(ctx, l.t.interrupted)
	defer stopNotice()
	end, readErr := l.produce(runCtx, src, batches)
	close(batches)
	wg.Wait()

	sum := l.t.summary()
	// An interrupt that came after the last batch was sent changed nothing
	// if that batch was acknowledged: the load is complete.
	all := end >= 0 && sum.Resume == end
	var fatal *FatalError
	switch {
	case readErr != nil:
		err = fmt.Errorf("reading the input: %w", readErr)
	case errors.As(context.Cause(runCtx), &fatal):
		err = fatal
	case sum.Failed > 0:
		err = fmt.Errorf("%d records failed", sum.Failed)
	case !all && ctx.Err() != nil:
		err = fmt.Errorf("%w: %w", errInterrupted, context.Cause(ctx))
	case !all:
		err = errors.New("the load stopped short of the end of the input") // a bug if ever seen
	}
	sum.Complete = err == nil
	l.t.finish(sum.Complete)
	sum.write(cfg.Out)
	return sum, err
}

// produce reads src into batches until the input ends, ctx is done, or a
// record cannot be read. A batch is cut at cfg.Batch records, before the
// body would pass the router's limit, and before an id that it already
// holds (the router refuses a request that names an id twice). It returns
// the offset one past the input's last record once it has handed every
// batch to a worker, and -1 when it stopped before that.
func (l *loader) produce(ctx context.Context, src Source, out chan<- *batch) (int64, error) {
	off := l.cfg.ResumeFrom
	var (
		b    *batch
		size int
		seen map[string]bool
	)
	var pace *rate.Limiter
	if l.cfg.Rate > 0 {
		// A batch is the burst: a rate below one batch a second sends
		// whole batches, further apart.
		pace = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Batch)
	}
	flush := func() bool {
		if b == nil {
			return true
		}
		if pace != nil {
			now := l.cfg.Clock.Now()
			if l.cfg.Clock.Sleep(ctx, pace.ReserveN(now, len(b.ids)).DelayFrom(now)) != nil {
				return false
			}
		}
		select {
		case out <- b:
			b = nil
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			if !flush() {
				return -1, nil
			}
			return off, nil
		}
		if err == nil && (len(rec.ID) < 1 || len(rec.ID) > maxIDBytes) {
			err = fmt.Errorf("record %d: id is %d bytes, want 1..%d", off, len(rec.ID), maxIDBytes)
		}
		var entry []byte
		if err == nil {
			entry = appendEntry(nil, rec)
			if bodySize(1, len(entry)) > l.maxBody {
				err = fmt.Errorf("record %d (id %q): %d bytes encoded, more than the router's %d-byte request limit", off, rec.ID, len(entry), l.maxBody)
			}
		}
		if err != nil {
			// Send what was read before the bad record, so the resume
			// offset can reach it.
			flush()
			return -1, err
		}
		if b != nil && (len(b.ids) == l.cfg.Batch || seen[rec.ID] ||
			bodySize(len(b.ids)+1, size+len(entry)) > l.maxBody) {
			if !flush() {
				return -1, nil
			}
		}
		if b == nil {
			b, size, seen = &batch{start: off}, 0, make(map[string]bool, l.cfg.Batch)
		}
		b.ids = append(b.ids, rec.ID)
		b.entries = append(b.entries, entry)
		size += len(entry)
		seen[rec.ID] = true
		off++
	}
	return -1, nil
}

// tracker keeps the counts, and the contiguous acknowledged prefix:
// batches finish out of order, so the resume offset is the lowest record
// not yet acknowledged, not the count of acknowledged records.
type tracker struct {
	clock    Clock
	start    time.Time
	skipped  int64
	total    int64
	progress progress

	mu       sync.Mutex
	prefix   int64 // every record before it is acknowledged
	stuck    bool  // the record at prefix will not be acknowledged in this run
	ahead    map[int64]settled
	nSent    int64
	acked    int64
	failed   int64
	errs     []string
	lat      []time.Duration
	retries  int
	finished bool
}

// settled is a batch that is done with, keyed by its first record.
type settled struct {
	end          int64 // one past its last record
	firstUnacked int64 // end when all were acknowledged
}

// maxErrors is how many failure messages a summary keeps.
const maxErrors = 5

func newTracker(cfg Config, total int64) *tracker {
	t := &tracker{
		clock:   cfg.Clock,
		start:   cfg.Clock.Now(),
		skipped: cfg.ResumeFrom,
		total:   total,
		prefix:  cfg.ResumeFrom,
		ahead:   map[int64]settled{},
	}
	t.progress = newProgress(cfg, total, t.start)
	return t
}

func (t *tracker) sent(n int) {
	t.mu.Lock()
	t.nSent += int64(n)
	t.mu.Unlock()
}

func (t *tracker) retry() {
	t.mu.Lock()
	t.retries++
	t.mu.Unlock()
}

func (t *tracker) latency(d time.Duration) {
	t.mu.Lock()
	t.lat = append(t.lat, d)
	t.mu.Unlock()
}

func (t *tracker) fail(off int64, id, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed++
	if len(t.errs) < maxErrors {
		t.errs = append(t.errs, fmt.Sprintf("record %d (id %q): %s", off, id, msg))
	}
}

// settle records that batch b is done with: acked says which of its
// records were acknowledged.
func (t *tracker) settle(b *batch, acked []bool) {
	s := settled{end: b.start + int64(len(acked))}
	s.firstUnacked = s.end
	n := 0
	for i, ok := range acked {
		if ok {
			n++
		} else if s.firstUnacked == s.end {
			s.firstUnacked = b.start + int64(i)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acked += int64(n)
	t.ahead[b.start] = s
	for !t.stuck {
		next, ok := t.ahead[t.prefix]
		if !ok {
			break
		}
		delete(t.ahead, t.prefix)
		t.prefix = next.firstUnacked
		t.stuck = next.firstUnacked < next.end
	}
	if !t.finished {
		t.progress.update(t.acked, t.failed, t.clock.Now())
	}
}

// interrupted says at once why the load is not over yet: a batch in
// flight can take up to the request timeout to be answered.
func (t *tracker) interrupted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.finished {
		t.progress.interrupted()
	}
}

func (t *tracker) finish(complete bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished = true
	t.progress.finish(complete)
}

func (t *tracker) summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Summary{
		Total:        t.total,
		Skipped:      t.skipped,
		Sent:         t.nSent,
		Acknowledged: t.acked,
		Failed:       t.failed,
		Errors:       append([]string(nil), t.errs...),
		Elapsed:      t.clock.Now().Sub(t.start),
		Batches:      len(t.lat),
		Retries:      t.retries,
		Resume:       t.prefix,
	}
	s.P50, s.P99 = percentiles(t.lat)
	return s
}
