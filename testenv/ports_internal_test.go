package testenv

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestPortsKeptApartAcrossProcesses: a port another live process took with FreePort is never
// given to this one (the test packages, and devenv beside them, are processes of their own), and
// is free to take again once that process is gone.
func TestPortsKeptApartAcrossProcesses(t *testing.T) {
	if os.Getenv("FLASHSALE_PORTS_CHILD") == "1" {
		holdPorts(t)
		return
	}
	t.Parallel()
	cmd, stdin, theirs := startPortHolder(t)
	for _, p := range theirs {
		if reservePort(p) {
			t.Errorf("port %d, held by another live process, was given to this one", p)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	// Gone with the child: free again (but for the odd one another test process took meanwhile).
	free := 0
	for _, p := range theirs {
		if reservePort(p) {
			free++
		}
	}
	if free < 40 {
		t.Errorf("%d of the child's 50 ports free after it exited, want nearly all", free)
	}
}

// holdPorts is the child: take 50 ports, say them, hold them until stdin closes.
func holdPorts(t *testing.T) {
	for range 50 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(strconv.Itoa(port) + "\n")
	}
	os.Stdout.WriteString("held\n")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// startPortHolder runs this test binary as the child (holdPorts) and returns once it holds its
// 50 ports: closing stdin lets it exit.
func startPortHolder(t *testing.T) (*exec.Cmd, io.WriteCloser, []int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPortsKeptApartAcrossProcesses$")
	cmd.Env = append(os.Environ(), "FLASHSALE_PORTS_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var theirs []int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "held" {
		p, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
		theirs = append(theirs, p)
	}
	if len(theirs) != 50 {
		cmd.Process.Kill()
		t.Fatalf("the child took %d ports, want 50", len(theirs))
	}
	return cmd, stdin, theirs
}
