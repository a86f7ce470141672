# network.sh: the containerd stage's pod network, sourced by setup.sh
# (which writes its conflist and inserts the guard) and teardown.sh (which
# removes both and the bridge). Its name, bridge and subnet are the stage's
# own, apart from the embedded runtime's default (jetlet0) and
# deploy/containerd's (10.88.0.0/16).
CNI_NAME=jetlet-e2e
CNI_BRIDGE=jetlet-e2e0
CNI_SUBNET=10.217.0.0/24
# The loopback guard docs/containerd.md tells operators to add, on the
# stage's bridge: a packet from a pod to the host's 127.0.0.0/8 is dropped
# unless it belongs to a connection the host made or to a port mapping
# (portmap's DNAT), so that portmap's route_localnet lets no pod reach what
# listens on the host's loopback (jetlet's NATS, HTTP, registry).
LOOPBACK_GUARD=(-i "$CNI_BRIDGE" -d 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP)
