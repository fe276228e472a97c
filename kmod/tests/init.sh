#!/bin/busybox sh
# SPDX-License-Identifier: GPL-2.0-only
# /init of the test VM: loads the modules, runs the suite, prints the
# kernel log and powers off.  The host reads it all from the console.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo "=== kmod-vm: booted at $(cut -d' ' -f1 /proc/uptime) s"

for m in $(cat /modules/order); do
	insmod "/modules/$m" || echo "not ok - insmod $m"
done
insmod /shiftfs.ko || echo "not ok - insmod shiftfs.ko"

run() {
	echo "=== kmod-vm: $* (at $(cut -d' ' -f1 /proc/uptime) s)"
	timeout 300 /shiftfs-test "$@"
	rc=$?
	echo "=== kmod-vm: $1 rc=$rc"
	return $rc
}

if run setup; then
	run security
	run ext4
	run tmpfs
	run whiteout
	run behind
	run overlay
	if [ -b /dev/vdb ] && [ -b /dev/vdc ]; then
		run pair /dev/vdb /dev/vdc
	fi
	run stress "${stress:-20}"
fi
echo "=== kmod-vm: modules after the run"
cat /proc/modules | grep shiftfs
echo "=== kmod-vm: dmesg"
dmesg
echo "=== kmod-vm: done at $(cut -d' ' -f1 /proc/uptime) s"
poweroff -f
