package proc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func skipWithoutProc(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this machine")
	}
}

// burn spends d of CPU time (at most 10 s of wall time, on a crowded machine).
func burn(d time.Duration) {
	x := 0
	for start, end := selfCPU(), time.Now().Add(10*time.Second); selfCPU()-start < d && time.Now().Before(end); {
		for i := range 100000 {
			x += i
		}
	}
	_ = x
}

func TestProcReaders(t *testing.T) {
	skipWithoutProc(t)
	burn(150 * time.Millisecond)
	pid := os.Getpid()
	cpu, err := procCPU(pid)
	if err != nil || cpu < 50*time.Millisecond {
		t.Errorf("procCPU(self) = %v, %v; want at least the 50 ms just burnt", cpu, err)
	}
	if self := selfCPU(); self < cpu-20*time.Millisecond {
		t.Errorf("selfCPU = %v, procCPU = %v: want them to agree", self, cpu)
	}
	if rss, err := procRSS(pid); err != nil || rss < 1<<20 {
		t.Errorf("procRSS(self) = %d, %v", rss, err)
	}
	if p := procParent(pid); p != os.Getppid() {
		t.Errorf("procParent = %d, want %d", p, os.Getppid())
	}
	if busy, total := machineCPU(); total <= 0 || busy <= 0 || busy > total {
		t.Errorf("machineCPU = %d busy of %d", busy, total)
	}
	if LoadAvg() == "" {
		t.Error("LoadAvg is empty")
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU(-1): no error")
	}
}

func TestListeningPIDAndChildren(t *testing.T) {
	skipWithoutProc(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ListeningPID(ln.Addr().(*net.TCPAddr).Port); got != os.Getpid() {
		t.Errorf("ListeningPID = %d, want this process %d", got, os.Getpid())
	}
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	if got := ListeningPID(port); got != 0 {
		t.Errorf("ListeningPID of a closed port = %d, want 0", got)
	}
	cmd := exec.Command("sleep", "10")
	cmd.SysProcAttr = ChildAttr()
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if kids := childrenOf(os.Getpid()); kids[0] != os.Getpid() || !slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("childrenOf(self) = %v, want self first and the child %d", kids, cmd.Process.Pid)
	}
}

// TestSampler measures this process while it burns CPU: the CPU, cores and RSS it reports
// must show it, and the generator's own CPU too.
func TestSampler(t *testing.T) {
	skipWithoutProc(t)
	s := StartSampler([]Watched{{Name: "self", PID: os.Getpid()}, {Name: "none", PID: 0}}, time.Now())
	burn(300 * time.Millisecond)
	procs, m := s.Finish()
	r, ok := procs["self"]
	if !ok {
		t.Fatalf("no report for the watched process: %v", procs)
	}
	if _, ok := procs["none"]; ok {
		t.Error("a process without a pid was reported")
	}
	if r.PID != os.Getpid() || r.CPU < 0.25 || r.Cores <= 0 || r.RSSPeak <= 0 || r.RSSEnd <= 0 {
		t.Errorf("report %+v: want ≥ 0.25 CPU s, some cores and a resident set", r)
	}
	if m.CPUs != runtime.NumCPU() || m.Duration < 0.25 || m.GenCPU < 0.25 || m.Busy <= 0 {
		t.Errorf("machine %+v: want %d CPUs, ≥ 0.25 s, ≥ 0.25 generator CPU s, some busy", m, runtime.NumCPU())
	}
}

// TestSamplerSumsSeveralProcesses watches this process and a busy child as one "server" (three
// instances are measured so): the CPU and the resident set are those of both.
func TestSamplerSumsSeveralProcesses(t *testing.T) {
	skipWithoutProc(t)
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	alone := StartSampler([]Watched{{Name: "self", PID: os.Getpid()}}, time.Now())
	both := StartSampler([]Watched{{Name: "both", PID: os.Getpid(), More: []int{cmd.Process.Pid}}}, time.Now())
	// Until the child has had 0.3 CPU s (on a busy machine that takes longer than on an idle one).
	for deadline := time.Now().Add(15 * time.Second); childCPU(cmd.Process.Pid) < 0.3 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	a, _ := alone.Finish()
	b, _ := both.Finish()
	if b["both"].PID != os.Getpid() {
		t.Errorf("the report names pid %d, want the first, %d", b["both"].PID, os.Getpid())
	}
	if b["both"].CPU < a["self"].CPU+0.2 {
		t.Errorf("self and a busy child used %.2f CPU s, self alone %.2f: the child's CPU is missing", b["both"].CPU, a["self"].CPU)
	}
	if b["both"].RSSEnd <= a["self"].RSSEnd {
		t.Errorf("resident set of both %.1f MiB, not above self's %.1f MiB", b["both"].RSSEnd, a["self"].RSSEnd)
	}
}

// childCPU is the CPU seconds (user and system) pid has used, from /proc/PID/stat (ticks of 1/100 s).
func childCPU(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return (u + sys) / 100
}
