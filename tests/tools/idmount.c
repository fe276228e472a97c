// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * idmount: make an idmapped bind mount, the kernel's own view of a map.
 *
 *   idmount [-r] [--map I:O:N] [--uid-map I:O:N] [--gid-map I:O:N] SRC DST
 *
 * A child unshares a user namespace whose uid_map/gid_map the parent
 * writes ("I O N" lines: on-disk id I shows as O); the parent clones
 * SRC with open_tree(), sets MOUNT_ATTR_IDMAP with that namespace and
 * moves the clone onto DST.  -r makes it read-only.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "idmount: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void append(char *buf, size_t size, const char *spec)
{
	unsigned long a, b, c;
	size_t len = strlen(buf);

	if (sscanf(spec, "%lu:%lu:%lu", &a, &b, &c) != 3) {
		fprintf(stderr, "idmount: bad map '%s'\n", spec);
		exit(2);
	}
	snprintf(buf + len, size - len, "%lu %lu %lu\n", a, b, c);
}

static void write_file(pid_t pid, const char *name, const char *text)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(path);
	close(fd);
}

static int userns_fd(const char *uids, const char *gids)
{
	int go[2], fd;
	char c = 0, path[64];
	pid_t pid;

	if (pipe(go) < 0)
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		if (write(go[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(go[0], &c, 1) != 1) {
		errno = ECHILD;
		die("user namespace child");
	}
	write_file(pid, "uid_map", uids);
	write_file(pid, "gid_map", gids);
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return fd;
}

int main(int argc, char **argv)
{
	char uids[4096] = "", gids[4096] = "";
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP };
	int i, tree;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-r")) {
			attr.attr_set |= MOUNT_ATTR_RDONLY;
			continue;
		}
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "--map") || !strcmp(argv[i], "--uid-map"))
			append(uids, sizeof(uids), argv[i + 1]);
		if (!strcmp(argv[i], "--map") || !strcmp(argv[i], "--gid-map"))
			append(gids, sizeof(gids), argv[i + 1]);
		i++;
	}
	if (argc - i != 2 || !uids[0] || !gids[0]) {
		fprintf(stderr, "usage: idmount [-r] [--map I:O:N] [--uid-map I:O:N] [--gid-map I:O:N] SRC DST\n");
		return 2;
	}
	attr.userns_fd = (unsigned long)userns_fd(uids, gids);
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, argv[i],
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		die("open_tree");
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr,
		    sizeof(attr)) < 0)
		die("mount_setattr(MOUNT_ATTR_IDMAP)");
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, argv[i + 1],
		    MOVE_MOUNT_F_EMPTY_PATH) < 0)
		die("move_mount");
	return 0;
}
