// SPDX-License-Identifier: GPL-2.0-only
/*
 * Mounting, options, the superblock, module init.
 *
 * Two kinds of mount (the 2017 shiftfs RFC's security model):
 *   mount -t shiftfs -o mark /lower /mark	real root only; the mark is a
 *						plain, noexec view of /lower
 *   mount -t shiftfs /mark/sub /target		CAP_SYS_ADMIN in a user
 *						namespace owning the mount
 *						namespace; only inside a mark
 * The second kind shows the lower through the mounter's user namespace.
 */
#include "shiftfs.h"

#include <linux/module.h>
#include <linux/namei.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/statfs.h>
#include <linux/string.h>

struct shiftfs_mount_data {
	const char *path;
	char *options;
};

static int shiftfs_parse_options(char *options, bool *mark)
{
	char *opt;

	*mark = false;
	while ((opt = strsep(&options, ",")) != NULL) {
		if (!*opt)
			continue;
		if (!strcmp(opt, "mark")) {
			*mark = true;
			continue;
		}
		pr_err("unknown option \"%s\"\n", opt);
		return -EINVAL;
	}
	return 0;
}

/* The mark owns a private clone of the lower mount. */
static int shiftfs_get_mark_lower(struct shiftfs_sb_info *sbi,
				  const char *name)
{
	struct vfsmount *mnt;
	struct path path;
	int err;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	err = kern_path(name, LOOKUP_FOLLOW | LOOKUP_DIRECTORY, &path);
	if (err)
		return err;
	err = -EINVAL;
	/* One shift at a time: no shiftfs below, no idmapped lower mount. */
	if (path.dentry->d_sb->s_type == &shiftfs_fs_type) {
		pr_err("%s: the lower cannot be shiftfs\n", name);
		goto out_put;
	}
	if (mnt_user_ns(path.mnt) != &init_user_ns) {
		pr_err("%s: the lower cannot be an idmapped mount\n", name);
		goto out_put;
	}
	mnt = clone_private_mount(&path);
	err = PTR_ERR(mnt);
	if (IS_ERR(mnt))
		goto out_put;
	sbi->lower.mnt = mnt;
	sbi->lower.dentry = dget(path.dentry);
	err = 0;
out_put:
	path_put(&path);
	return err;
}

/* A shifted mount shares its mark's lower mount. */
static int shiftfs_get_shifted_lower(struct shiftfs_sb_info *sbi,
				     const char *name)
{
	struct shiftfs_sb_info *mark;
	struct path path;
	int err;

	if (!ns_capable(current_user_ns(), CAP_SYS_ADMIN))
		return -EPERM;
	err = kern_path(name, LOOKUP_FOLLOW | LOOKUP_DIRECTORY, &path);
	if (err)
		return err;
	err = -EPERM;
	if (path.dentry->d_sb->s_type != &shiftfs_fs_type)
		goto out_put;
	mark = shiftfs_sbi(path.dentry->d_sb);
	if (!mark->mark)
		goto out_put;
	sbi->lower.mnt = mntget(mark->lower.mnt);
	sbi->lower.dentry = dget(shiftfs_lower_dentry(path.dentry));
	err = 0;
out_put:
	path_put(&path);
	return err;
}

static int shiftfs_setup_sb(struct super_block *sb)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct super_block *lower_sb = sbi->lower.dentry->d_sb;
	struct inode *root;

	sb->s_stack_depth = lower_sb->s_stack_depth + 1;
	if (sb->s_stack_depth > FILESYSTEM_MAX_STACK_DEPTH) {
		pr_err("maximum stacking depth exceeded\n");
		return -EINVAL;
	}
	sbi->userns = sb->s_user_ns;
	sbi->lower_ns = lower_sb->s_user_ns;
	sbi->fixup = !(lower_sb->s_type->fs_flags & FS_ALLOW_IDMAP) &&
		     sbi->userns != &init_user_ns &&
		     sbi->userns != sbi->lower_ns;

	sb->s_magic = SHIFTFS_MAGIC;
	sb->s_op = &shiftfs_super_ops;
	sb->s_xattr = shiftfs_xattr_handlers;
	sb->s_d_op = &shiftfs_dentry_ops;
	sb->s_maxbytes = lower_sb->s_maxbytes;
	sb->s_time_gran = lower_sb->s_time_gran;
	sb->s_blocksize = lower_sb->s_blocksize;
	sb->s_blocksize_bits = lower_sb->s_blocksize_bits;
	/* Umask and default ACLs are then applied by the lower, once. */
	sb->s_flags |= lower_sb->s_flags & SB_POSIXACL;
	/* The mark shows ids unshifted: nothing there may be executed. */
	if (sbi->mark)
		sb->s_iflags |= SB_I_NOEXEC | SB_I_NODEV;

	root = shiftfs_iget(sb, d_inode(sbi->lower.dentry));
	if (IS_ERR(root))
		return PTR_ERR(root);
	sb->s_root = d_make_root(root);
	if (!sb->s_root)
		return -ENOMEM;
	sb->s_root->d_fsdata = dget(sbi->lower.dentry);
	return 0;
}

static int shiftfs_fill_super(struct super_block *sb, void *data, int silent)
{
	struct shiftfs_mount_data *md = data;
	struct shiftfs_sb_info *sbi;
	bool mark;
	int err;

	err = shiftfs_parse_options(md->options, &mark);
	if (err)
		return err;
	if (!md->path)
		return -EINVAL;
	sbi = kzalloc(sizeof(*sbi), GFP_KERNEL);
	if (!sbi)
		return -ENOMEM;
	/* From here on shiftfs_kill_sb() frees whatever was set up. */
	sb->s_fs_info = sbi;
	sbi->mark = mark;
	if (mark)
		err = shiftfs_get_mark_lower(sbi, md->path);
	else
		err = shiftfs_get_shifted_lower(sbi, md->path);
	if (err)
		return err;
	return shiftfs_setup_sb(sb);
}

static struct dentry *shiftfs_mount(struct file_system_type *fs_type,
				    int flags, const char *dev_name,
				    void *data)
{
	struct shiftfs_mount_data md = { .path = dev_name, .options = data };

	return mount_nodev(fs_type, flags, &md, shiftfs_fill_super);
}

static void shiftfs_kill_sb(struct super_block *sb)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);

	kill_anon_super(sb);
	if (!sbi)
		return;
	dput(sbi->lower.dentry);
	/* The mark's clone is long-term; shifted mounts hold plain refs. */
	if (sbi->mark)
		kern_unmount(sbi->lower.mnt);
	else
		mntput(sbi->lower.mnt);
	kfree(sbi);
}

static void shiftfs_evict_inode(struct inode *inode)
{
	struct inode *lower = shiftfs_lower_inode(inode);

	truncate_inode_pages_final(&inode->i_data);
	clear_inode(inode);
	iput(lower);
}

static int shiftfs_statfs(struct dentry *dentry, struct kstatfs *buf)
{
	struct path path;
	int err;

	shiftfs_lower_path(dentry, &path);
	err = vfs_statfs(&path, buf);
	if (!err)
		buf->f_type = SHIFTFS_MAGIC;
	return err;
}

static int shiftfs_show_options(struct seq_file *m, struct dentry *root)
{
	if (shiftfs_sbi(root->d_sb)->mark)
		seq_puts(m, ",mark");
	return 0;
}

const struct super_operations shiftfs_super_ops = {
	.statfs		= shiftfs_statfs,
	.show_options	= shiftfs_show_options,
	.evict_inode	= shiftfs_evict_inode,
	/* Unused inodes go at once: the lower keeps its own cache. */
	.drop_inode	= generic_delete_inode,
};

struct file_system_type shiftfs_fs_type = {
	.owner		= THIS_MODULE,
	.name		= "shiftfs",
	.mount		= shiftfs_mount,
	.kill_sb	= shiftfs_kill_sb,
	.fs_flags	= FS_USERNS_MOUNT,
};
MODULE_ALIAS_FS("shiftfs");

static int __init shiftfs_init(void)
{
	return register_filesystem(&shiftfs_fs_type);
}

static void __exit shiftfs_exit(void)
{
	unregister_filesystem(&shiftfs_fs_type);
}

module_init(shiftfs_init);
module_exit(shiftfs_exit);

MODULE_DESCRIPTION("id-shifting stacking filesystem for user namespaces");
MODULE_LICENSE("GPL");
