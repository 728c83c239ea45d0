package loadgen

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress prints one status line while a phase runs: on a terminal it is rewritten in place
// twice a second, otherwise a line is printed every two seconds.
type Progress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	name string
	s    *Stats
	n    int
	last struct {
		t   time.Time
		req int64
	}
	stop chan struct{}
	done chan struct{}
}

// NewProgress starts the progress line on w; disabled, it returns nil, which prints nothing.
func NewProgress(w io.Writer, enabled bool) *Progress {
	if !enabled {
		return nil
	}
	p := &Progress{w: w, stop: make(chan struct{}), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	go p.loop()
	return p
}

func (p *Progress) set(name string, s *Stats, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == nil && p.s != nil && p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	p.name, p.s, p.n = name, s, n
	p.last.t, p.last.req = time.Now(), 0
}

// Note prints a message line, not overwritten by the ticker.
func (p *Progress) Note(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *Progress) loop() {
	defer close(p.done)
	every := 2 * time.Second
	if p.tty {
		every = 500 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.print()
		}
	}
}

func (p *Progress) print() {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.s
	if s == nil {
		return
	}
	now := time.Now()
	req := s.requests.Load()
	rate := float64(req-p.last.req) / now.Sub(p.last.t).Seconds()
	p.last.t, p.last.req = now, req
	el := now.Sub(s.base).Seconds()
	started, done := s.started.Load(), s.done.Load()
	var codes []string
	for _, c := range []Class{Class200, Class202, Class409, Class410, Class5xx, ClassTimeout, ClassNetErr} {
		var n int64
		for k := KindToken; k < KindArrival; k++ {
			n += s.Count(k, c)
		}
		if n > 0 {
			codes = append(codes, fmt.Sprintf("%s:%d", ClassNames[c], n))
		}
	}
	sched, dropped := s.scheduled.Load(), s.dropped.Load()
	line := fmt.Sprintf("[%s] t=%+.1fs arrivals %d/%d answered %d in flight %d queued %d late %d | %.0f req/s | %s",
		p.name, el, sched, p.n, done-dropped, started-(done-dropped), sched-started-dropped, s.late.Load(), rate, strings.Join(codes, " "))
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K"+line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// Close stops the progress line.
func (p *Progress) Close() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	if p.tty && p.s != nil {
		fmt.Fprint(p.w, "\r\033[K")
	}
	p.mu.Unlock()
}
