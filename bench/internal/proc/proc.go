// Package proc reads what processes on this machine use, from /proc: the CPU and memory of the
// server under test, its Redis and its Postgres while a phase runs, the machine's load, and
// which process listens on a port.
package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on every Linux this runs on).
const clockTicks = 100

// procCPU returns the CPU time (user + system) of a process.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// the command may hold spaces and parentheses: the fields start after the last ')'
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // utime (field 14)
	st, err2 := strconv.ParseInt(f[12], 10, 64) // stime (field 15)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procParent returns a process's parent pid.
func procParent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// procRSS returns a process's resident set size in bytes.
func procRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fs := strings.Fields(rest)
			if len(fs) >= 1 {
				kb, err := strconv.ParseInt(fs[0], 10, 64)
				if err != nil {
					return 0, err
				}
				return kb * 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// selfCPU returns this process's CPU time (getrusage), the generator's cost.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU returns the busy and total jiffies of all CPUs from /proc/stat.
func machineCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, s := range f[1:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		if i >= 8 { // guest times are already counted in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// LoadAvg returns /proc/loadavg's first three numbers.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// ListeningPID finds the process listening on a TCP port on this machine, from /proc/net/tcp*
// (the socket's inode) and /proc/*/fd (who holds it). It returns 0 if none is visible.
func ListeningPID(port int) int {
	inodes := map[string]bool{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		fds, err := os.ReadDir(dir + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(dir + "/fd/" + fd.Name()); err == nil && inodes[link] {
				pid, _ := strconv.Atoi(filepath.Base(dir))
				return pid
			}
		}
	}
	return 0
}

// childrenOf returns pid and its direct children (a Postgres postmaster and its backends).
func childrenOf(pid int) []int {
	out := []int{pid}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		p, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || p == pid {
			continue
		}
		if procParent(p) == pid {
			out = append(out, p)
		}
	}
	return out
}

// Watched is a process (or a process group, for Postgres) whose CPU and memory are sampled:
// with More, several processes counted as one (three server instances, six Redis Cluster nodes).
type Watched struct {
	Name  string
	PID   int
	More  []int // further processes summed with PID
	Group bool  // include the direct children
}

// pids is PID and More, each with its direct children when w is a group.
func (w Watched) pids() []int {
	var out []int
	for _, p := range append([]int{w.PID}, w.More...) {
		if p <= 0 {
			continue
		}
		if w.Group {
			out = append(out, childrenOf(p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// Report is what one watched process used during a phase.
type Report struct {
	PID      int     `json:"pid"`
	CPU      float64 `json:"cpu_s"`        // user + system seconds
	Cores    float64 `json:"cores"`        // average cores busy
	RSSPeak  float64 `json:"rss_peak_mib"` // largest resident set seen (sum over a group)
	RSSEnd   float64 `json:"rss_end_mib"`
	CPUPerRq float64 `json:"cpu_us_per_request,omitempty"`
}

// Sampler reads /proc every 100 ms while a phase runs.
type Sampler struct {
	procs   []Watched
	start   time.Time
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	cpu0    map[int]time.Duration // per pid, at the start
	cpuLast map[int]time.Duration
	members map[string][]int
	peak    map[string]int64
	end     map[string]int64
	busy0   int64
	total0  int64
	gen0    time.Duration
}

// StartSampler starts sampling procs from at (sooner if finished before).
func StartSampler(procs []Watched, at time.Time) *Sampler {
	s := &Sampler{procs: procs, stop: make(chan struct{}), done: make(chan struct{}),
		cpu0: map[int]time.Duration{}, cpuLast: map[int]time.Duration{}, members: map[string][]int{},
		peak: map[string]int64{}, end: map[string]int64{}}
	go s.loop(at)
	return s
}

func (s *Sampler) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = time.Now()
	s.busy0, s.total0 = machineCPU()
	s.gen0 = selfCPU()
	for _, w := range s.procs {
		if w.PID <= 0 {
			continue
		}
		pids := w.pids()
		s.members[w.Name] = pids
		for _, p := range pids {
			if c, err := procCPU(p); err == nil {
				s.cpu0[p], s.cpuLast[p] = c, c
			}
		}
	}
}

func (s *Sampler) loop(at time.Time) {
	defer close(s.done)
	if d := time.Until(at); d > 0 {
		select {
		case <-s.stop:
			s.begin()
			s.sample(true)
			return
		case <-time.After(d):
		}
	}
	s.begin()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-s.stop:
			s.sample(true)
			return
		case <-t.C:
			s.sample(i%10 == 0) // look for new Postgres backends once a second
		}
	}
}

func (s *Sampler) sample(rescan bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.procs {
		if w.PID <= 0 {
			continue
		}
		if rescan && w.Group {
			for _, p := range w.pids() {
				if _, ok := s.cpu0[p]; !ok {
					s.cpu0[p] = 0 // started during the phase: all its CPU counts
					s.members[w.Name] = append(s.members[w.Name], p)
				}
			}
		}
		var rss int64
		for _, p := range s.members[w.Name] {
			if c, err := procCPU(p); err == nil {
				s.cpuLast[p] = c
			}
			if r, err := procRSS(p); err == nil {
				rss += r
			}
		}
		s.end[w.Name] = rss
		s.peak[w.Name] = max(s.peak[w.Name], rss)
	}
}

// Machine is the whole machine during a phase.
type Machine struct {
	Busy     float64 `json:"busy"` // fraction of all CPUs busy
	CPUs     int     `json:"cpus"`
	LoadAvg  string  `json:"loadavg_end"`
	GenCPU   float64 `json:"generator_cpu_s"`
	Duration float64 `json:"duration_s"`
}

// Finish stops sampling and reports per watched process and for the machine.
func (s *Sampler) Finish() (map[string]Report, Machine) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	el := time.Since(s.start)
	busy, total := machineCPU()
	m := Machine{CPUs: runtime.NumCPU(), LoadAvg: LoadAvg(), GenCPU: (selfCPU() - s.gen0).Seconds(), Duration: el.Seconds()}
	if total > s.total0 {
		m.Busy = float64(busy-s.busy0) / float64(total-s.total0)
	}
	out := map[string]Report{}
	for _, w := range s.procs {
		if w.PID <= 0 {
			continue
		}
		var cpu time.Duration
		for _, p := range s.members[w.Name] {
			cpu += s.cpuLast[p] - s.cpu0[p]
		}
		r := Report{PID: w.PID, CPU: cpu.Seconds(), RSSPeak: mib(s.peak[w.Name]), RSSEnd: mib(s.end[w.Name])}
		if el > 0 {
			r.Cores = cpu.Seconds() / el.Seconds()
		}
		out[w.Name] = r
	}
	return out, m
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
