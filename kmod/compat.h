/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Every VFS call whose signature depends on the kernel version.
 *
 * 5.12 to 6.2 pass the idmapping of a mount as a struct user_namespace;
 * 6.3 replaced it with struct mnt_idmap.  The rest of shiftfs only uses
 * shiftfs_mnt_t and the shiftfs_vfs_* calls below, so supporting 6.3+
 * means adding a second branch here (the mounting namespace then has to
 * be turned into an mnt_idmap once, at mount time, and kept in sbi).
 */
#ifndef SHIFTFS_COMPAT_H
#define SHIFTFS_COMPAT_H

#include <linux/version.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0) || \
	LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#error "shiftfs: only Linux 6.1 is supported so far (see compat.h)"
#endif

#include <linux/fs.h>
#include <linux/fileattr.h>
#include <linux/mnt_idmapping.h>
#include <linux/namei.h>
#include <linux/xattr.h>

/* What the VFS hands to inode operations as the mount's idmapping. */
typedef struct user_namespace shiftfs_mnt_t;

/* The idmapping lower calls are made with: the mounting namespace. */
#define SHIFTFS_IDMAP(sbi)	((sbi)->userns)
/* No idmapping: for calls that pass ids already in the lower's terms. */
#define SHIFTFS_NOIDMAP		(&init_user_ns)

/* A lower kuid as the mounting namespace sees it (make_vfsuid). */
static inline kuid_t shiftfs_kuid_up(struct user_namespace *ns,
				     struct user_namespace *fs_ns, kuid_t kuid)
{
	return vfsuid_into_kuid(make_vfsuid(ns, fs_ns, kuid));
}

static inline kgid_t shiftfs_kgid_up(struct user_namespace *ns,
				     struct user_namespace *fs_ns, kgid_t kgid)
{
	return vfsgid_into_kgid(make_vfsgid(ns, fs_ns, kgid));
}

/* The inverse: what a kuid seen through the mount is stored as. */
static inline kuid_t shiftfs_kuid_down(struct user_namespace *ns,
				       struct user_namespace *fs_ns, kuid_t kuid)
{
	return from_vfsuid(ns, fs_ns, VFSUIDT_INIT(kuid));
}

static inline kgid_t shiftfs_kgid_down(struct user_namespace *ns,
				       struct user_namespace *fs_ns, kgid_t kgid)
{
	return from_vfsgid(ns, fs_ns, VFSGIDT_INIT(kgid));
}

/* iattr ids are vfsuids since 6.0; at our layer they are plain kuids. */
static inline kuid_t shiftfs_iattr_uid(const struct iattr *attr)
{
	return vfsuid_into_kuid(attr->ia_vfsuid);
}

static inline kgid_t shiftfs_iattr_gid(const struct iattr *attr)
{
	return vfsgid_into_kgid(attr->ia_vfsgid);
}

static inline void shiftfs_iattr_set_ids(struct iattr *attr, kuid_t uid,
					 kgid_t gid)
{
	attr->ia_vfsuid = VFSUIDT_INIT(uid);
	attr->ia_vfsgid = VFSGIDT_INIT(gid);
}

static inline struct dentry *shiftfs_vfs_lookup(shiftfs_mnt_t *mnt,
						const struct qstr *name,
						struct dentry *base)
{
	return lookup_one(mnt, name->name, base, name->len);
}

static inline struct dentry *shiftfs_vfs_lookup_unlocked(shiftfs_mnt_t *mnt,
							 const struct qstr *name,
							 struct dentry *base)
{
	return lookup_one_unlocked(mnt, name->name, base, name->len);
}

static inline int shiftfs_vfs_create(shiftfs_mnt_t *mnt, struct inode *dir,
				     struct dentry *dentry, umode_t mode)
{
	return vfs_create(mnt, dir, dentry, mode, true);
}

static inline int shiftfs_vfs_mkdir(shiftfs_mnt_t *mnt, struct inode *dir,
				    struct dentry *dentry, umode_t mode)
{
	return vfs_mkdir(mnt, dir, dentry, mode);
}

static inline int shiftfs_vfs_mknod(shiftfs_mnt_t *mnt, struct inode *dir,
				    struct dentry *dentry, umode_t mode,
				    dev_t rdev)
{
	return vfs_mknod(mnt, dir, dentry, mode, rdev);
}

static inline int shiftfs_vfs_symlink(shiftfs_mnt_t *mnt, struct inode *dir,
				      struct dentry *dentry, const char *link)
{
	return vfs_symlink(mnt, dir, dentry, link);
}

static inline int shiftfs_vfs_link(shiftfs_mnt_t *mnt, struct dentry *old,
				   struct inode *dir, struct dentry *new)
{
	return vfs_link(old, mnt, dir, new, NULL);
}

static inline int shiftfs_vfs_unlink(shiftfs_mnt_t *mnt, struct inode *dir,
				     struct dentry *dentry)
{
	return vfs_unlink(mnt, dir, dentry, NULL);
}

static inline int shiftfs_vfs_rmdir(shiftfs_mnt_t *mnt, struct inode *dir,
				    struct dentry *dentry)
{
	return vfs_rmdir(mnt, dir, dentry);
}

static inline int shiftfs_vfs_rename(shiftfs_mnt_t *mnt, struct inode *odir,
				     struct dentry *old, struct inode *ndir,
				     struct dentry *new, unsigned int flags)
{
	struct renamedata rd = {
		.old_mnt_userns	= mnt,
		.old_dir	= odir,
		.old_dentry	= old,
		.new_mnt_userns	= mnt,
		.new_dir	= ndir,
		.new_dentry	= new,
		.flags		= flags,
	};

	return vfs_rename(&rd);
}

static inline struct file *shiftfs_vfs_tmpfile_open(shiftfs_mnt_t *mnt,
						    const struct path *parent,
						    umode_t mode, int flags)
{
	return vfs_tmpfile_open(mnt, parent, mode, flags, current_cred());
}

static inline int shiftfs_vfs_setattr(shiftfs_mnt_t *mnt,
				      struct dentry *dentry,
				      struct iattr *attr)
{
	return notify_change(mnt, dentry, attr, NULL);
}

static inline int shiftfs_vfs_permission(shiftfs_mnt_t *mnt,
					 struct inode *inode, int mask)
{
	return inode_permission(mnt, inode, mask);
}

static inline int shiftfs_vfs_setxattr(shiftfs_mnt_t *mnt,
				       struct dentry *dentry, const char *name,
				       const void *value, size_t size,
				       int flags)
{
	return vfs_setxattr(mnt, dentry, name, value, size, flags);
}

/* Stores the value as given: the caller converted it already. */
static inline int shiftfs_vfs_setxattr_raw(shiftfs_mnt_t *mnt,
					   struct dentry *dentry,
					   const char *name,
					   const void *value, size_t size,
					   int flags)
{
	struct inode *inode = d_inode(dentry);
	int err;

	inode_lock(inode);
	err = __vfs_setxattr_locked(mnt, dentry, name, value, size, flags,
				    NULL);
	inode_unlock(inode);
	return err;
}

static inline int shiftfs_vfs_removexattr(shiftfs_mnt_t *mnt,
					  struct dentry *dentry,
					  const char *name)
{
	return vfs_removexattr(mnt, dentry, name);
}

static inline int shiftfs_vfs_fileattr_set(shiftfs_mnt_t *mnt,
					   struct dentry *dentry,
					   struct fileattr *fa)
{
	return vfs_fileattr_set(mnt, dentry, fa);
}

#endif /* SHIFTFS_COMPAT_H */
