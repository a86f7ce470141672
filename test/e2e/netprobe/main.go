// Command netprobe is what the network tests run in a pod: it reports, as
// JSON on stdout, the pod's network namespace, which TCP addresses and
// abstract unix sockets it reaches, and whether an AF_PACKET capture on its
// lo sees a marker the host sends on the host's loopback; -out names a file
// to write it to instead.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// report is what netprobe prints.
type report struct {
	NetNS string `json:"netns"`
	// Links are the pod's network interfaces.
	Links []string `json:"links"`
	// Dials maps each address of -dial (tcp host:port, or @name for an
	// abstract unix socket) to "" when it connected, else the error.
	Dials map[string]string `json:"dials"`
	// SawHostMarker and SawOwnMarker say whether the capture on lo saw the
	// host's marker and the pod's own (sent on its lo: the capture works).
	SawHostMarker bool   `json:"sawHostMarker"`
	SawOwnMarker  bool   `json:"sawOwnMarker"`
	CaptureError  string `json:"captureError,omitempty"`
}

func main() {
	dials := flag.String("dial", "", "comma-separated addresses to connect to: host:port (TCP) or @name (abstract unix socket)")
	retry := flag.String("retry", "", "comma-separated addresses of -dial retried for 30s until they connect (a server still starting)")
	marker := flag.String("capture-lo", "", "capture on lo until -stop exists and report whether this marker and its own passed")
	ready := flag.String("ready", "", "file made once the capture runs")
	stop := flag.String("stop", "", "file whose existence ends the capture")
	out := flag.String("out", "", "write the report to this file (written whole: a temporary file renamed) instead of stdout")
	flag.Parse()

	r := report{Dials: map[string]string{}}
	r.NetNS, _ = os.Readlink("/proc/self/ns/net")
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		r.Links = append(r.Links, i.Name)
	}
	for _, a := range split(*dials) {
		r.Dials[a] = errString(dial(a, strings.Contains(","+*retry+",", ","+a+",")))
	}
	if *marker != "" {
		r.SawHostMarker, r.SawOwnMarker, r.CaptureError = capture(*marker, *ready, *stop)
	}
	data, _ := json.Marshal(r)
	if *out == "" {
		fmt.Println(string(data))
		return
	}
	if err := os.WriteFile(*out+".tmp", data, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(*out+".tmp", *out); err != nil {
		log.Fatal(err)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func dial(addr string, retry bool) error {
	network := "tcp"
	if strings.HasPrefix(addr, "@") {
		network = "unix"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout(network, addr, 2*time.Second)
		if err == nil {
			return c.Close()
		}
		if !retry || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// capture reads every frame on lo until stop exists, looking for marker and
// for the marker of its own it sends to 127.0.0.1 once the capture runs.
func capture(marker, ready, stop string) (sawHost, sawOwn bool, errMsg string) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return false, false, fmt.Sprintf("AF_PACKET socket: %v", err)
	}
	defer unix.Close(fd)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return false, false, err.Error()
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: lo.Index}); err != nil {
		return false, false, fmt.Sprintf("bind to lo: %v", err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return false, false, err.Error()
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return false, false, err.Error()
	}
	own := "own-" + marker
	if c, err := net.Dial("udp", "127.0.0.1:9"); err == nil {
		_, _ = c.Write([]byte(own))
		c.Close()
	}
	buf := make([]byte, 65536)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == nil {
			frame := buf[:n]
			sawOwn = sawOwn || bytes.Contains(frame, []byte(own))
			sawHost = sawHost || bytes.Contains(frame, []byte(marker)) && !bytes.Contains(frame, []byte(own))
		}
		if _, err := os.Stat(stop); err == nil {
			return sawHost, sawOwn, ""
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
