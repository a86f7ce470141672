package bridge

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	kubelet := Config{KubeletListen: ":10250", KubeletAddress: "10.0.0.5", ClientCAFile: "ca.crt"}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"defaults", func(c *Config) { *c = Config{} }, ""},
		{"kubelet API", func(*Config) {}, ""},
		{"any port", func(c *Config) { c.KubeletListen = "127.0.0.1:0" }, ""},
		{"no address", func(c *Config) { c.KubeletAddress = "" }, "--kubelet-address"},
		{"no client CA", func(c *Config) { c.ClientCAFile = "" }, "--client-ca-file"},
		{"no port", func(c *Config) { c.KubeletListen = "10.0.0.5" }, "--kubelet-listen"},
		{"a port too high", func(c *Config) { c.KubeletListen = ":70000" }, "not a port number"},
		{"a cert without its key", func(c *Config) { c.TLSCertFile = "tls.crt" }, "--tls-private-key-file"},
		{"a short lease", func(c *Config) { c.LeaseDuration = 2_000_000_000 }, "lease duration"},
		{"leader election's defaults", func(c *Config) { c.LeaderElection.Enabled = true }, ""},
		{"a renew deadline as long as the lease", func(c *Config) {
			c.LeaderElection = LeaderElection{Enabled: true, LeaseDuration: 10 * time.Second, RenewDeadline: 10 * time.Second}
		}, "--leader-elect-lease-duration 10s: must be longer than --leader-elect-renew-deadline 10s"},
		{"a retry as long as the renew deadline", func(c *Config) {
			c.LeaderElection = LeaderElection{Enabled: true, RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second}
		}, "--leader-elect-renew-deadline 2s: must be longer than --leader-elect-retry-period 2s"},
		{"a retry within the renew deadline but for its jitter", func(c *Config) {
			c.LeaderElection = LeaderElection{Enabled: true, RenewDeadline: 3 * time.Second, RetryPeriod: 2600 * time.Millisecond}
		}, "--leader-elect-renew-deadline"},
		{"a negative retry", func(c *Config) { c.LeaderElection = LeaderElection{Enabled: true, RetryPeriod: -time.Second} }, "--leader-elect-retry-period -1s: must be positive"},
		{"the test's short lease", func(c *Config) {
			c.LeaderElection = LeaderElection{Enabled: true, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second}
		}, ""},
		{"no election, bad durations unchecked", func(c *Config) { c.LeaderElection = LeaderElection{RenewDeadline: time.Hour} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kubelet
			tt.edit(&c)
			c.setDefaults()
			err := c.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
