// Command testimages writes test/testimages' images as archives, or serves
// them as a registry until it is killed, for shell stages
// (test/critest/run.sh). Every image is built from the host's
// busybox-static.
//
//	testimages -o DIR                     DIR/images.oci.tar (`ctr images export`'s format)
//	                                      and DIR/images.docker.tar (`docker save`'s)
//	testimages -serve 127.0.0.1:0         a registry over plain HTTP
//	testimages -serve-tls 127.0.0.1:443 -tls-names registry.k8s.io,gcr.io -ca-out ca.pem
//	                                      a registry over TLS for those names, its CA in ca.pem
//
// -set says which images: jetlet (testimages.Named: testimages/busybox:latest,
// ...), critest (testimages.Critest: critest v1.37.0's references) or all.
// A registry serves each reference without its registry
// (registry.k8s.io/pause:3.9 as pause:3.9). It prints a line for each
// address it serves on, then "testimages: ready", and serves until SIGTERM or
// SIGINT. -user and -password make it private (basic authentication).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/jetlet/jetlet/test/testimages"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testimages:", err)
		os.Exit(1)
	}
}

type options struct {
	set, out, serve, serveTLS, tlsNames, caOut, user, password string
	verbose                                                    bool
}

func run() error {
	var o options
	flag.StringVar(&o.set, "set", "all", "the images: jetlet, critest or all")
	flag.StringVar(&o.out, "o", "", "write DIR/images.oci.tar and DIR/images.docker.tar")
	flag.StringVar(&o.serve, "serve", "", "serve a registry over plain HTTP on `ADDR` (host:port; port 0 picks one)")
	flag.StringVar(&o.serveTLS, "serve-tls", "", "serve the registry over TLS on `ADDR` too")
	flag.StringVar(&o.tlsNames, "tls-names", strings.Join(testimages.CritestRegistries, ","), "the names, comma-separated, the TLS certificate is for")
	flag.StringVar(&o.caOut, "ca-out", "", "write the TLS certificate's CA (PEM) to `FILE`")
	flag.StringVar(&o.user, "user", "", "require basic authentication with this user")
	flag.StringVar(&o.password, "password", "", "... and this password")
	flag.BoolVar(&o.verbose, "v", false, "log every request to stderr")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if o.out == "" && o.serve == "" && o.serveTLS == "" {
		return errors.New("nothing to do: give -o, -serve or -serve-tls")
	}
	if o.serveTLS != "" && o.caOut == "" {
		return errors.New("-serve-tls needs -ca-out: a client must trust its CA")
	}
	refs, err := images(o.set)
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := write(o.out, refs); err != nil {
			return err
		}
	}
	if o.serve == "" && o.serveTLS == "" {
		return nil
	}
	return serve(o, refs)
}

func images(set string) (map[string]v1.Image, error) {
	refs := map[string]v1.Image{}
	if set == "jetlet" || set == "all" {
		named, err := testimages.Named()
		if err != nil {
			return nil, err
		}
		maps.Copy(refs, named)
	}
	if set == "critest" || set == "all" {
		critest, err := testimages.Critest()
		if err != nil {
			return nil, err
		}
		maps.Copy(refs, critest)
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("-set %q: want jetlet, critest or all", set)
	}
	return refs, nil
}

func write(dir string, refs map[string]v1.Image) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, w := range map[string]func(f *os.File) error{
		"images.oci.tar":    func(f *os.File) error { return testimages.WriteOCILayout(f, refs) },
		"images.docker.tar": func(f *os.File) error { return testimages.WriteDockerArchive(f, refs) },
	} {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		err = w(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		fmt.Printf("testimages: wrote %s (%d references)\n", p, len(refs))
	}
	return nil
}

func serve(o options, refs map[string]v1.Image) error {
	paths, err := testimages.RegistryPaths(refs)
	if err != nil {
		return err
	}
	var opts []testimages.RegistryOption
	var push []remote.Option
	if o.user != "" || o.password != "" {
		opts = append(opts, testimages.WithBasicAuth(o.user, o.password))
		push = append(push, remote.WithAuth(&authn.Basic{Username: o.user, Password: o.password}))
	}
	if o.verbose {
		opts = append(opts, testimages.WithLog(log.New(os.Stderr, "testimages: ", log.LstdFlags)))
	}
	h := testimages.Handler(opts...)
	// Pushed through a listener of its own on loopback (plain HTTP, as ggcr
	// speaks to 127.0.0.1), closed once the images are in.
	if err := pushThroughLoopback(h, paths, push); err != nil {
		return err
	}

	errs := make(chan error, 2)
	var servers []*http.Server
	start := func(ln net.Listener, url string) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(os.Stderr, "testimages: ", log.LstdFlags)}
		servers = append(servers, srv)
		go func() { errs <- srv.Serve(ln) }()
		fmt.Printf("testimages: %d references (%d paths) on %s\n", len(refs), len(paths), url)
	}
	if o.serve != "" {
		ln, err := net.Listen("tcp", o.serve)
		if err != nil {
			return err
		}
		start(ln, "http://"+ln.Addr().String())
	}
	if o.serveTLS != "" {
		serverTLS, caPEM, err := testimages.NewTLS(strings.Split(o.tlsNames, ",")...)
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.caOut, caPEM, 0o644); err != nil {
			return err
		}
		ln, err := tls.Listen("tcp", o.serveTLS, serverTLS)
		if err != nil {
			return err
		}
		start(ln, fmt.Sprintf("https://%s (for %s; CA in %s)", ln.Addr(), o.tlsNames, o.caOut))
	}
	fmt.Println("testimages: ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		fmt.Printf("testimages: %v, stopping\n", s)
	case err := <-errs:
		return err
	}
	for _, srv := range servers {
		_ = srv.Close()
	}
	return nil
}

func pushThroughLoopback(h http.Handler, paths map[string]v1.Image, opts []remote.Option) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return testimages.Push(ctx, ln.Addr().String(), paths, opts...)
}
