#!/bin/busybox sh
# SPDX-License-Identifier: GPL-2.0-or-later
# /init of the power-cut VM (tests/journal/powercut.test): mounts
# /dev/vda and runs shiftimg on /mnt/t; pc_at on the kernel command line
# says what then:
#   exit     a reset right after shiftimg exits
#   late     a reset 7 s after it exits, past ext4's 5 s commit interval
#   mid      a reset half-way through its apply pass, while it runs
# The reset goes through sysrq, with no sync and no unmount, so that
# what the guest had not written to its disk is lost, as in a power cut.
# The markers go to /dev/kmsg: printk writes to the serial console
# before it returns, so they are out before the reset; the tty's
# buffered output may not be.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
say() { echo "<2>powercut: $*" >/dev/kmsg; }
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# A zombie has exited: only a live process runs.
alive() {
	state=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ]
}
cut_power() {
	say "cut at $(now) s"
	echo b >/proc/sysrq-trigger
	sleep 5
	say "sysrq did not reset the machine"
	poweroff -f
}

for m in $(cat /modules/order); do
	insmod "/modules/$m" || say "insmod $m failed"
done
echo 1 >/proc/sys/kernel/sysrq
# The disk may show up a little after its driver is loaded.
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.5; done
mkdir -p /mnt
mount -t ext4 /dev/vda /mnt || { say "cannot mount /dev/vda"; poweroff -f; }
say "running shiftimg (${pc_at:-}) at $(now) s"

set -- /shiftimg --map 0:100000:65536 /mnt/t
start=$(now)
case ${pc_at:-} in
exit | late)
	"$@"
	say "shiftimg rc=$? in $(since "$start") s"
	[ "$pc_at" = late ] && sleep 7
	cut_power
	;;
mid)
	"$@" &
	pid=$!
	# Half-way through the pass that applies the plan: half of the
	# sample files (f200 of each of the test's data directories) seen
	# shifted.  Nothing changes before the plan is durable.
	while alive "$pid"; do
		n=$(stat -c %u /mnt/t/data/d*/f200 |
			awk '$1 >= 100000 { n++ } END { print n + 0, NR }')
		[ "${n#* }" -gt 0 ] && [ $((${n% *} * 2)) -ge "${n#* }" ] && break
	done
	if alive "$pid"; then
		say "mid-run after $(since "$start") s: ${n% *} of ${n#* } sample files shifted"
	else
		wait "$pid"
		say "shiftimg rc=$? in $(since "$start") s, before the cut"
	fi
	cut_power
	;;
esac
say "unknown pc_at=${pc_at:-}"
poweroff -f
