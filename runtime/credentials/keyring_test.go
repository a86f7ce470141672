package credentials

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// users lists the usernames (or tokens) of what Lookup returned, in order.
func users(k *Keyring, image string) []string {
	var out []string
	for _, a := range k.Lookup(image) {
		switch {
		case a.Username != "":
			out = append(out, a.Username)
		case a.IdentityToken != "":
			out = append(out, "identity:"+a.IdentityToken)
		default:
			out = append(out, "registry:"+a.RegistryToken)
		}
	}
	return out
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestLookupMatchesAsKubeletsKeyring(t *testing.T) {
	cfg := fmt.Sprintf(`{"auths": {
	  "https://index.docker.io/v1/": {"auth": %q},
	  "registry.example.com":        {"username": "plain", "password": "pw"},
	  "registry.example.com/team":   {"auth": %q},
	  "registry.example.com/team/app": {"auth": %q},
	  "*.wild.example.org":          {"auth": %q},
	  "localhost:5000":              {"auth": %q},
	  "http://insecure.example.net/v2/": {"identitytoken": "idt"},
	  "tokens.example.net":          {"registrytoken": "rgt"}
	}}`, basic("hub", "h"), basic("team", "t"), basic("app", "a"), basic("wild", "w"), basic("local", "l"))
	k, err := Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		image string
		want  []string
	}{
		// Docker Hub: a short name, library images, every alias of the host.
		{"busybox", []string{"hub"}},
		{"busybox:1.36", []string{"hub"}},
		{"someone/app:v1", []string{"hub"}},
		{"docker.io/library/busybox", []string{"hub"}},
		{"index.docker.io/someone/app", []string{"hub"}},
		{"index.docker.io/library/busybox:1.36@sha256:" + hex64, []string{"hub"}},
		// The image's reference in the normal form every user of references
		// shares (schemas/imageref, containerd's and kubelet's): Docker Hub's
		// backend host is another registry there (this keyring's own
		// normaliser made it docker.io), and a reference that does not
		// parse is pulled by nobody, so it gets no credentials.
		{"registry-1.docker.io/someone/app@sha256:" + hex64, nil},
		{"Busybox", nil},
		{"busybox@sha256:abcd", nil},
		// The host, and longer paths of it first.
		{"registry.example.com/other/app:v1", []string{"plain"}},
		{"registry.example.com/team/x", []string{"team", "plain"}},
		{"registry.example.com/team/app:v2", []string{"app", "team", "plain"}},
		// Ports are part of the host; a different port is another registry.
		{"localhost:5000/jetlet/busybox:e2e", []string{"local"}},
		{"localhost:5001/jetlet/busybox:e2e", nil},
		{"localhost/jetlet/busybox:e2e", nil},
		// A wildcard label matches one label.
		{"eu.wild.example.org/app", []string{"wild"}},
		{"wild.example.org/app", nil},
		{"a.b.wild.example.org/app", nil},
		// Scheme and /v2/ of a key are dropped.
		{"insecure.example.net/app", []string{"identity:idt"}},
		{"tokens.example.net/app", []string{"registry:rgt"}},
		{"quay.io/app", nil},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			if got := users(k, tt.image); !slices.Equal(got, tt.want) {
				t.Errorf("Lookup(%q) = %v, want %v", tt.image, got, tt.want)
			}
		})
	}
}

func TestLookupDecodesAuthIntoUsernameAndPassword(t *testing.T) {
	k, err := Parse([]byte(`{"auths": {"r.example.com": {"auth": "` + basic("u", "p:with:colons") + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := k.Lookup("r.example.com/app")
	if len(got) != 1 || got[0].Username != "u" || got[0].Password != "p:with:colons" || got[0].ServerAddress != "" {
		t.Fatalf("Lookup = %v, want u / p:with:colons and no server address", got)
	}
}

func TestParseErrorsNameTheKeyNeverTheSecret(t *testing.T) {
	tests := []struct{ name, cfg, want string }{
		{"not base64", `{"auths": {"r.example.com": {"auth": "s3cr3t!!"}}}`, "auths[r.example.com]: auth is not base64"},
		{"no colon", `{"auths": {"r.example.com": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("s3cr3t")) + `"}}}`, "not base64 of user:password"},
		{"empty entry", `{"auths": {"r.example.com": {}}}`, "none of auth"},
		{"not JSON", `{"auths": {"r.example.com": {"password": "s3cr3t"`, "invalid JSON"},
		{"wrong type", `{"auths": {"r.example.com": {"password": 1234}}}`, "must be a string"},
		{"not a host", `{"auths": {"https://": {"username": "u", "password": "s3cr3t"}}}`, "not a registry host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.cfg))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

func TestParseReportsCredentialHelpers(t *testing.T) {
	k, err := Parse([]byte(`{"auths": {}, "credsStore": "desktop", "credHelpers": {"gcr.io": "gcloud"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.CredentialHelpers(); !slices.Equal(got, []string{"credsStore", "credHelpers[gcr.io]"}) {
		t.Errorf("CredentialHelpers = %v", got)
	}
	if k.Lookup("gcr.io/app") != nil {
		t.Error("a registry with only a helper got credentials")
	}
}
