/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * shiftfs: a stacking filesystem that shows a lower tree through the
 * idmapping of the user namespace that mounted it, the way an idmapped
 * mount made with that namespace would.
 *
 * Every shiftfs dentry holds its lower dentry in d_fsdata, every inode
 * its lower inode in i_private, every open file its lower file in
 * private_data.  Lower calls are made with the caller's own credentials
 * and the mounting namespace as the mount idmapping: the lower
 * filesystem and the VFS then apply exactly the idmapped-mount rules.
 */
#ifndef SHIFTFS_H
#define SHIFTFS_H

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/mount.h>
#include <linux/path.h>
#include <linux/user_namespace.h>

#include "compat.h"

#define SHIFTFS_MAGIC	0x73686674	/* "shft" */

struct shiftfs_sb_info {
	struct path lower;		/* private lower mount, lower root */
	struct user_namespace *userns;	/* ids are shown through it */
	struct user_namespace *lower_ns; /* the lower superblock's s_user_ns */
	bool mark;			/* "-o mark": real root's passthrough */
	/*
	 * The lower filesystem ignores the mount idmapping when it creates
	 * inodes or changes attributes (tmpfs on 6.1): shiftfs sets owners
	 * itself there.
	 */
	bool fixup;
};

static inline struct shiftfs_sb_info *shiftfs_sbi(const struct super_block *sb)
{
	return sb->s_fs_info;
}

static inline struct dentry *shiftfs_lower_dentry(const struct dentry *dentry)
{
	return dentry->d_fsdata;
}

static inline struct inode *shiftfs_lower_inode(const struct inode *inode)
{
	return inode->i_private;
}

static inline struct file *shiftfs_lower_file(const struct file *file)
{
	return file->private_data;
}

/* super.c */
extern struct file_system_type shiftfs_fs_type;
extern const struct super_operations shiftfs_super_ops;

/* namei.c */
extern const struct dentry_operations shiftfs_dentry_ops;
struct dentry *shiftfs_lookup(struct inode *dir, struct dentry *dentry,
			      unsigned int flags);

/* inode.c */
struct inode *shiftfs_iget(struct super_block *sb, struct inode *lower);
int shiftfs_instantiate(struct dentry *dentry, struct dentry *lower);
int shiftfs_permission(shiftfs_mnt_t *mnt, struct inode *inode, int mask);
int shiftfs_getattr(shiftfs_mnt_t *mnt, const struct path *path,
		    struct kstat *stat, u32 request_mask, unsigned int flags);
int shiftfs_setattr(shiftfs_mnt_t *mnt, struct dentry *dentry,
		    struct iattr *attr);
struct posix_acl *shiftfs_get_acl(struct inode *inode, int type, bool rcu);
ssize_t shiftfs_listxattr(struct dentry *dentry, char *list, size_t size);
int shiftfs_fileattr_get(struct dentry *dentry, struct fileattr *fa);
int shiftfs_fileattr_set(shiftfs_mnt_t *mnt, struct dentry *dentry,
			 struct fileattr *fa);
extern const struct xattr_handler *shiftfs_xattr_handlers[];

/* dir.c */
extern const struct inode_operations shiftfs_dir_inode_ops;
extern const struct file_operations shiftfs_dir_ops;

/* file.c */
extern const struct file_operations shiftfs_file_ops;
int shiftfs_open_lower(struct inode *inode, struct file *file);
int shiftfs_release(struct inode *inode, struct file *file);

/* util.c */
void shiftfs_copyattr(struct inode *inode);
void shiftfs_lower_path(const struct dentry *dentry, struct path *path);
int shiftfs_want_write(struct super_block *sb);
void shiftfs_drop_write(struct super_block *sb);
int shiftfs_fixup_owner(struct super_block *sb, struct inode *lower_dir,
			struct dentry *lower);
int shiftfs_do_setattr_forced(struct super_block *sb, struct dentry *lower,
			      struct iattr *attr);
void shiftfs_acl_xattr_up(const struct shiftfs_sb_info *sbi, void *value,
			  size_t size);
bool shiftfs_is_acl_xattr(const char *name);

#endif /* SHIFTFS_H */
