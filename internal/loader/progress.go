package loader

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how a load is going. Calls come from the tracker, under
// its lock, so implementations need none of their own.
type progress interface {
	// update is called after each batch with this run's counts.
	update(acked, failed int64, now time.Time)
	interrupted()
	finish(complete bool)
}

const interruptedNotice = "interrupted: waiting for the batches in flight to be answered"

func newProgress(cfg Config, total int64, start time.Time) progress {
	if cfg.Terminal {
		return newBar(cfg.Out, total, cfg.ResumeFrom)
	}
	return &lines{w: cfg.Out, every: cfg.ProgressEvery, total: total, skipped: cfg.ResumeFrom,
		start: start, last: start, tenth: tenth(cfg.ResumeFrom, total)}
}

// lines prints a plain line every so often and at each tenth of the input,
// for logs and CI where a redrawn bar would be noise:
//
//	loaded 12000/100000 (12.0%) 3400 vectors/s ETA 23s
type lines struct {
	w       io.Writer
	every   time.Duration
	total   int64 // -1 when unknown
	skipped int64
	start   time.Time
	last    time.Time // of the last line
	tenth   int64     // of the input reached at the last line
}

func tenth(loaded, total int64) int64 {
	if total <= 0 {
		return 0
	}
	return 10 * loaded / total
}

func (p *lines) update(acked, failed int64, now time.Time) {
	loaded := p.skipped + acked
	t := tenth(loaded, p.total)
	if now.Sub(p.last) < p.every && t == p.tenth {
		return
	}
	p.last, p.tenth = now, t
	rate := 0.0
	if el := now.Sub(p.start).Seconds(); el > 0 {
		rate = float64(acked) / el
	}
	line := fmt.Sprintf("loaded %d", loaded)
	if p.total >= 0 {
		line += fmt.Sprintf("/%d (%.1f%%)", p.total, 100*float64(loaded)/float64(max(p.total, 1)))
	}
	line += fmt.Sprintf(" %.0f vectors/s", rate)
	if left := p.total - loaded - failed; p.total >= 0 && rate > 0 && left > 0 {
		line += " ETA " + time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String()
	}
	if failed > 0 {
		line += fmt.Sprintf(", %d failed", failed)
	}
	fmt.Fprintln(p.w, line)
}

func (p *lines) interrupted() { fmt.Fprintln(p.w, interruptedNotice) }

func (p *lines) finish(bool) {}

// bar is the terminal's progress bar: count, rate and, with a known
// total, ETA; a spinner and count for JSON Lines, whose length is only
// known at its end. It counts this run's records, so a resumed load's
// rate and ETA are its own.
type bar struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newBar(w io.Writer, total, skipped int64) *bar {
	max := int64(-1)
	desc := "loading"
	if total >= 0 {
		max = total - skipped
	}
	if skipped > 0 {
		desc = fmt.Sprintf("loading (from record %d)", skipped)
	}
	if max == 0 {
		return &bar{w: w} // nothing to load: no bar to draw
	}
	return &bar{w: w, bar: progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("vectors"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionThrottle(100*time.Millisecond),
		// 0 turns off the spinner's own redraw goroutine (for an unknown
		// total), which would outlive the load: it advances per update.
		progressbar.OptionSetSpinnerChangeInterval(0),
	)}
}

func (b *bar) update(acked, failed int64, _ time.Time) {
	if b.bar != nil {
		_ = b.bar.Set64(acked + failed)
	}
}

func (b *bar) interrupted() { fmt.Fprintln(b.w, "\n"+interruptedNotice) }

func (b *bar) finish(complete bool) {
	if b.bar == nil {
		return
	}
	if complete && b.bar.GetMax64() > 0 {
		_ = b.bar.Finish()
	}
	_ = b.bar.Exit()
	fmt.Fprintln(b.w)
}
