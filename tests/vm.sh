# SPDX-License-Identifier: GPL-2.0-or-later
# Shell helpers for the tests that boot Debian's 6.1 kernel in qemu with
# a busybox initramfs: source it; the caller defines skip and fail.
#   vm_kernel [headers]    sets kver, vmlinuz and moddir to the newest 6.1
#                          kernel with an image (and headers, if asked);
#                          $VM_KVER picks one; skips if there is none
#   vm_tools CMD...        skips unless qemu, cpio, gzip, a static
#                          /bin/busybox and CMD... are there
#   vm_modules ROOT M...   the kernel's modules M..., each after what it
#                          depends on, in ROOT/modules, their load order
#                          in ROOT/modules/order
#   vm_pack ROOT INITRD    packs ROOT (with /bin/busybox) as an initramfs
#   vm_boot SECS LOG INITRD APPEND QEMU-ARG...
#                          boots it (TCG: KVM is not needed), the serial
#                          console in LOG; qemu exits when the guest
#                          powers off or reboots; returns qemu's status

vm_kernel() {
	kver=${VM_KVER:-}
	if [ -z "$kver" ]; then
		for _d in /lib/modules/6.1.*; do
			_v=${_d##*/}
			[ -r "/boot/vmlinuz-$_v" ] || continue
			[ "${1:-}" = headers ] && ! [ -e "$_d/build/Makefile" ] && continue
			kver=$_v
		done
	fi
	[ -n "$kver" ] || skip "no 6.1 kernel${1:+ with $1} (linux-image-amd64${1:+, linux-headers-amd64})"
	vmlinuz=/boot/vmlinuz-$kver
	moddir=/lib/modules/$kver
}

vm_tools() {
	for _t in qemu-system-x86_64 cpio gzip "$@"; do
		command -v "$_t" >/dev/null 2>&1 || skip "$_t is missing"
	done
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
		skip "/bin/busybox is missing or not static (busybox-static)"
}

vm_modules() {
	_vm_root=$1
	shift
	mkdir -p "$_vm_root/modules" && : >"$_vm_root/modules/order" ||
		fail "cannot create $_vm_root/modules"
	for _m; do _vm_module "$_m"; done
}
_vm_module() {
	local line path dep name
	line=$(grep -E "^[^:]*/$1\.ko(\.[a-z]+)?:" "$moddir/modules.dep") ||
		fail "module $1 not in $moddir/modules.dep"
	path=${line%%:*}
	for dep in ${line#*:}; do
		name=${dep##*/}
		_vm_module "${name%%.ko*}"
	done
	name=${path##*/}
	grep -qx "$name" "$_vm_root/modules/order" && return 0
	cp "$moddir/$path" "$_vm_root/modules/$name" || fail "copying $path"
	echo "$name" >>"$_vm_root/modules/order"
}

vm_pack() {
	mkdir -p "$1/bin" "$1/proc" "$1/sys" "$1/dev" "$1/tmp" &&
		cp /bin/busybox "$1/bin/busybox" || fail "populating $1"
	(cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) >"$2" ||
		fail "packing the initramfs"
}

vm_boot() {
	_secs=$1 _log=$2 _initrd=$3 _append=$4
	shift 4
	timeout "$_secs" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1G \
		-display none -monitor none -no-reboot -serial "file:$_log" \
		-kernel "$vmlinuz" -initrd "$_initrd" "$@" \
		-append "console=ttyS0 panic=-1 $_append"
}
