// Package etchosts holds what every pod's /etc/hosts starts with, shared by
// the reconcile (kubelet's managed hosts file) and the embedded runtime
// (containerd's sandbox hosts file).
package etchosts

// Localhost is localhost's names, the first lines of a pod's hosts file
// (kubelet's and containerd's).
const Localhost = `127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
fe00::0	ip6-localnet
fe00::0	ip6-mcastprefix
fe00::1	ip6-allnodes
fe00::2	ip6-allrouters
`
