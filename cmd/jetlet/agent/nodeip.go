package agent

import (
	"net"
)

// nodeIP is the node's address, as kubelet picks it without --node-ip: the
// source address of the default route (a UDP "connect" sends nothing), else
// the first global address of an interface that is up; empty when there is
// none. hostNetwork pods have it as their IP, and the downward API's
// status.hostIP reads it.
func nodeIP() string {
	if c, err := net.Dial("udp", "8.8.8.8:53"); err == nil {
		defer c.Close()
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.IsGlobalUnicast() {
			return a.IP.String()
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return ""
}
