#!/bin/bash
# guest.sh: run by the guest's systemd at boot (jetlet-guest.service) from
# the host's shared directory, /mnt/jetlet (test/vm/run.sh). Each test
# binary in bin/ runs as root in a directory and a systemd unit of its own;
# its test2json output, exit status and seconds land in out/. out/done says
# it finished.
#
# A binary whose test asked for a shutdown (test/vm/vmguest writes
# out/shutdown-asked) has no status: on the next boot it runs again, with
# JETLET_VM_BOOT telling the test how many boots its binary has run in (1
# the first), and the binaries that finished before it are not run again.
# So several packages whose tests cross boots share one run's boots.
set -u
share=/mnt/jetlet
boot=$(cat "$share/boot")
read -r up _ </proc/uptime
{
	echo "boot $boot: booted to the tests in ${up%.*}s (kernel $(uname -r), systemd $(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p'), PID 1 $(cat /proc/1/comm), /sys/fs/cgroup $(stat -fc %T /sys/fs/cgroup))"
} >"$share/out/uptime"
# A v1 hierarchy, or no v2 one, would make the run prove nothing.
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] || grep -q ' cgroup ' /proc/mounts; then
	echo "guest: not a pure cgroup v2 host" | tee -a "$share/out/uptime"
	exit 1
fi
filter=$(cat "$share/run-filter")
timeout=$(cat "$share/test-timeout")
prebuilt=
[ ! -d "$share/cmd" ] || prebuilt=$share/cmd
for bin in "$share"/bin/*.test; do
	name=$(basename "$bin" .test)
	[ ! -f "$share/out/$name.rc" ] || continue
	runs=$(($(cat "$share/out/$name.runs" 2>/dev/null || echo 0) + 1))
	echo "$runs" >"$share/out/$name.runs"
	# Its package's directory, as go test runs it (testdata, from the host).
	dir=$(mktemp -d /var/tmp/"$name".XXXXXX)
	cp -r "$share/pkg/$name/." "$dir/"
	start=$(date +%s)
	# In a unit of its own with its cgroup delegated, as jetlet runs
	# (docs/deploy.md): the runtime makes its cgroups below its own.
	systemd-run --quiet --wait --pipe --collect --unit="jetlet-test-$name" -p Delegate=yes \
		${prebuilt:+--setenv=JETLET_GOBUILD_DIR="$prebuilt"} \
		--setenv=JETLET_VM_BOOT="$runs" --setenv=JETLET_VM_SHARE="$share" \
		--working-directory="$dir" -- "$bin" -test.v=test2json -test.count=1 -test.timeout="$timeout" \
		${filter:+-test.run "$filter"} </dev/null >"$share/out/$name.log" 2>&1
	status=$?
	if [ -f "$share/out/shutdown-asked" ]; then
		# The shutdown stopped the test's unit: its status says nothing,
		# and the host boots the guest again.
		cp "$share/out/$name.log" "$share/out/$name.boot$runs.log"
		echo "guest: $name asked for a shutdown on boot $boot"
		exit 0
	fi
	echo $status >"$share/out/$name.rc"
	echo $(($(date +%s) - start)) >"$share/out/$name.secs"
	echo "guest: $name exit $status"
done
touch "$share/out/done"
