package client

import "testing"

func TestRedactURLs(t *testing.T) {
	got := redactURLs("nats://u:secret@a:4222, nats://b:4222,tls://t@c:1")
	if want := "nats://u:xxxxx@a:4222,nats://b:4222,tls://t@c:1"; got != want {
		t.Errorf("redactURLs = %q, want %q", got, want)
	}
}
