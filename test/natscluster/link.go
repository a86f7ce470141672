package natscluster

import (
	"io"
	"net"
	"sync"
)

// link forwards TCP connections from its own loopback port to one server's
// cluster port. Each ordered pair of servers routes through its own link, so
// that cutting a server's links partitions it from the others while its
// clients stay connected.
type link struct {
	ln net.Listener

	mu     sync.Mutex // guards target, cut and conns
	target string
	cut    bool
	conns  map[net.Conn]struct{}
}

func newLink(target string) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go l.accept()
	return l, nil
}

func (l *link) addr() string { return l.ln.Addr().String() }

func (l *link) accept() {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		go l.forward(in)
	}
}

// retarget forwards new connections to addr (the server moved to a new port).
func (l *link) retarget(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target = addr
}

func (l *link) forward(in net.Conn) {
	l.mu.Lock()
	target := l.target
	l.mu.Unlock()
	out, err := net.Dial("tcp", target)
	if err != nil {
		in.Close()
		return
	}
	if !l.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	in.Close()
	out.Close()
	<-done
	l.untrack(in, out)
}

// track registers a forwarded pair; it refuses while the link is cut.
func (l *link) track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return false
	}
	for _, c := range conns {
		l.conns[c] = struct{}{}
	}
	return true
}

func (l *link) untrack(conns ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range conns {
		delete(l.conns, c)
	}
}

// setCut drops every connection through the link and refuses new ones, or
// lets them through again.
func (l *link) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for c := range l.conns {
			c.Close()
		}
	}
}

func (l *link) close() {
	l.ln.Close()
	l.setCut(true)
}
