// SPDX-License-Identifier: GPL-2.0-only
/* Inodes: aliasing, attributes, permission, ACLs, xattrs, flags. */
#include "shiftfs.h"

#include <linux/fileattr.h>
#include <linux/posix_acl.h>
#include <linux/xattr.h>

static const struct inode_operations shiftfs_file_inode_ops;
static const struct inode_operations shiftfs_symlink_inode_ops;
static const struct inode_operations shiftfs_special_inode_ops;

static int shiftfs_inode_test(struct inode *inode, void *lower)
{
	return inode->i_private == lower;
}

static int shiftfs_inode_set(struct inode *inode, void *lower)
{
	inode->i_private = lower;
	ihold(lower);
	return 0;
}

static void shiftfs_fill_inode(struct inode *inode, struct inode *lower)
{
	inode->i_ino = lower->i_ino;
	inode->i_generation = lower->i_generation;
	/* ACLs are read from the lower each time and mapped (get_acl). */
	inode->i_acl = ACL_DONT_CACHE;
	inode->i_default_acl = ACL_DONT_CACHE;
	shiftfs_copyattr(inode);

	switch (lower->i_mode & S_IFMT) {
	case S_IFREG:
		inode->i_op = &shiftfs_file_inode_ops;
		inode->i_fop = &shiftfs_file_ops;
		break;
	case S_IFDIR:
		inode->i_op = &shiftfs_dir_inode_ops;
		inode->i_fop = &shiftfs_dir_ops;
		break;
	case S_IFLNK:
		inode->i_op = &shiftfs_symlink_inode_ops;
		break;
	default:
		inode->i_op = &shiftfs_special_inode_ops;
		init_special_inode(inode, lower->i_mode, lower->i_rdev);
		break;
	}
}

/*
 * One shiftfs inode per lower inode, found by the lower inode's
 * address: hard links stay one inode, as they are below.
 */
struct inode *shiftfs_iget(struct super_block *sb, struct inode *lower)
{
	struct inode *inode;

	inode = iget5_locked(sb, (unsigned long)lower, shiftfs_inode_test,
			     shiftfs_inode_set, lower);
	if (!inode)
		return ERR_PTR(-ENOMEM);
	if (!(inode->i_state & I_NEW)) {
		shiftfs_copyattr(inode);
		return inode;
	}
	shiftfs_fill_inode(inode, lower);
	unlock_new_inode(inode);
	return inode;
}

/* Gives a negative dentry its new lower object; takes the lower ref. */
int shiftfs_instantiate(struct dentry *dentry, struct dentry *lower)
{
	struct inode *inode;

	if (d_is_negative(lower))
		return -ENOENT;
	inode = shiftfs_iget(dentry->d_sb, d_inode(lower));
	if (IS_ERR(inode))
		return PTR_ERR(inode);
	dentry->d_fsdata = lower;
	d_instantiate(dentry, inode);
	return 0;
}

/*
 * The VFS checked our inode (read-only, immutable, unmapped ids); the
 * mode bits, ACLs and capabilities are checked on the lower inode
 * through the mounting namespace, by the kernel's own rules.
 */
int shiftfs_permission(shiftfs_mnt_t *mnt, struct inode *inode, int mask)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(inode->i_sb);

	return shiftfs_vfs_permission(SHIFTFS_IDMAP(sbi),
				      shiftfs_lower_inode(inode), mask);
}

int shiftfs_getattr(shiftfs_mnt_t *mnt, const struct path *path,
		    struct kstat *stat, u32 request_mask, unsigned int flags)
{
	struct super_block *sb = path->dentry->d_sb;
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct path lower;
	int err;

	shiftfs_lower_path(path->dentry, &lower);
	err = vfs_getattr(&lower, stat, request_mask, flags);
	if (err)
		return err;
	stat->uid = shiftfs_kuid_up(sbi->userns, sbi->lower_ns, stat->uid);
	stat->gid = shiftfs_kgid_up(sbi->userns, sbi->lower_ns, stat->gid);
	/* Our device: lower inode numbers are unique within one lower fs. */
	stat->dev = sb->s_dev;
	return 0;
}

/* ia_file, if any, must be the lower file for the lower filesystem. */
static void shiftfs_attr_file(struct iattr *lattr, struct inode *inode)
{
	struct file *file = lattr->ia_file;

	if (!(lattr->ia_valid & ATTR_FILE))
		return;
	if (file_inode(file) == inode && file->f_op == &shiftfs_file_ops)
		lattr->ia_file = shiftfs_lower_file(file);
	else
		lattr->ia_valid &= ~ATTR_FILE;
}

int shiftfs_setattr(shiftfs_mnt_t *mnt, struct dentry *dentry,
		    struct iattr *attr)
{
	struct super_block *sb = dentry->d_sb;
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct inode *inode = d_inode(dentry);
	struct dentry *lower = shiftfs_lower_dentry(dentry);
	struct iattr lattr;
	int err;

	/* A lower that ignores idmappings cannot check this itself. */
	if (sbi->fixup) {
		err = setattr_prepare(mnt, dentry, attr);
		if (err)
			return err;
	}
	lattr = *attr;
	/* notify_change() refuses both: let the lower recompute the mode. */
	if (lattr.ia_valid & (ATTR_KILL_SUID | ATTR_KILL_SGID))
		lattr.ia_valid &= ~ATTR_MODE;
	shiftfs_attr_file(&lattr, inode);

	err = shiftfs_want_write(sb);
	if (err)
		return err;
	inode_lock(d_inode(lower));
	if (sbi->fixup)
		err = shiftfs_do_setattr_forced(sb, lower, &lattr);
	else
		err = shiftfs_vfs_setattr(SHIFTFS_IDMAP(sbi), lower, &lattr);
	inode_unlock(d_inode(lower));
	shiftfs_drop_write(sb);
	shiftfs_copyattr(inode);
	return err;
}

/*
 * For stacking on top of shiftfs (an overlayfs lower layer): the lower
 * ACL with its ids seen through the mounting namespace.
 */
struct posix_acl *shiftfs_get_acl(struct inode *inode, int type, bool rcu)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(inode->i_sb);
	struct posix_acl *acl, *copy;
	struct posix_acl_entry *pa, *pe;

	if (rcu)
		return ERR_PTR(-ECHILD);
	acl = get_acl(shiftfs_lower_inode(inode), type);
	if (IS_ERR_OR_NULL(acl))
		return acl;
	copy = posix_acl_clone(acl, GFP_KERNEL);
	posix_acl_release(acl);
	if (!copy)
		return ERR_PTR(-ENOMEM);

	FOREACH_ACL_ENTRY(pa, copy, pe) {
		if (pa->e_tag == ACL_USER)
			pa->e_uid = shiftfs_kuid_up(sbi->userns, sbi->lower_ns,
						    pa->e_uid);
		else if (pa->e_tag == ACL_GROUP)
			pa->e_gid = shiftfs_kgid_up(sbi->userns, sbi->lower_ns,
						    pa->e_gid);
	}
	return copy;
}

/*
 * Values are read raw: security.capability's rootid is relative to our
 * superblock's namespace (the mounting one) exactly as the stored value
 * is relative to the lower's, and the VFS above us converts it for the
 * caller.  ACL ids are mapped here over the returned length only.
 */
static int shiftfs_xattr_get(const struct xattr_handler *handler,
			     struct dentry *dentry, struct inode *inode,
			     const char *name, void *value, size_t size)
{
	struct dentry *lower;
	ssize_t ret;

	if (!dentry)
		return -EOPNOTSUPP;
	lower = shiftfs_lower_dentry(dentry);
	ret = __vfs_getxattr(lower, d_inode(lower), name, value, size);
	if (ret > 0 && value && shiftfs_is_acl_xattr(name))
		shiftfs_acl_xattr_up(shiftfs_sbi(inode->i_sb), value, ret);
	return ret;
}

static int shiftfs_do_xattr_set(struct shiftfs_sb_info *sbi,
				struct dentry *lower, const char *name,
				const void *value, size_t size, int flags)
{
	if (!value)
		return shiftfs_vfs_removexattr(SHIFTFS_IDMAP(sbi), lower, name);
	/* Converted for our namespace by the VFS already: store as is. */
	if (!strcmp(name, XATTR_NAME_CAPS))
		return shiftfs_vfs_setxattr_raw(SHIFTFS_IDMAP(sbi), lower,
						name, value, size, flags);
	/* ACL ids arrive as kuids: the lower maps them down (idmapping). */
	return shiftfs_vfs_setxattr(SHIFTFS_IDMAP(sbi), lower, name, value,
				    size, flags);
}

static int shiftfs_xattr_set(const struct xattr_handler *handler,
			     shiftfs_mnt_t *mnt, struct dentry *dentry,
			     struct inode *inode, const char *name,
			     const void *value, size_t size, int flags)
{
	struct super_block *sb = inode->i_sb;
	int err;

	if (!dentry)
		return -EOPNOTSUPP;
	err = shiftfs_want_write(sb);
	if (err)
		return err;
	err = shiftfs_do_xattr_set(shiftfs_sbi(sb),
				   shiftfs_lower_dentry(dentry), name, value,
				   size, flags);
	shiftfs_drop_write(sb);
	/* Setting an ACL can change the mode. */
	shiftfs_copyattr(inode);
	return err;
}

/* Every name goes to the lower, ACLs and capabilities included. */
static const struct xattr_handler shiftfs_xattr_handler = {
	.prefix	= "",
	.get	= shiftfs_xattr_get,
	.set	= shiftfs_xattr_set,
};

const struct xattr_handler *shiftfs_xattr_handlers[] = {
	&shiftfs_xattr_handler,
	NULL,
};

ssize_t shiftfs_listxattr(struct dentry *dentry, char *list, size_t size)
{
	return vfs_listxattr(shiftfs_lower_dentry(dentry), list, size);
}

int shiftfs_fileattr_get(struct dentry *dentry, struct fileattr *fa)
{
	return vfs_fileattr_get(shiftfs_lower_dentry(dentry), fa);
}

/* FS_IOC_SETFLAGS only; the lower checks ownership through the idmap. */
int shiftfs_fileattr_set(shiftfs_mnt_t *mnt, struct dentry *dentry,
			 struct fileattr *fa)
{
	struct super_block *sb = dentry->d_sb;
	int err;

	if (!fa->flags_valid)
		return -EOPNOTSUPP;
	err = shiftfs_want_write(sb);
	if (err)
		return err;
	err = shiftfs_vfs_fileattr_set(SHIFTFS_IDMAP(shiftfs_sbi(sb)),
				       shiftfs_lower_dentry(dentry), fa);
	shiftfs_drop_write(sb);
	shiftfs_copyattr(d_inode(dentry));
	return err;
}

static const char *shiftfs_get_link(struct dentry *dentry, struct inode *inode,
				    struct delayed_call *done)
{
	/* The lower may sleep: no RCU walk through our symlinks. */
	if (!dentry)
		return ERR_PTR(-ECHILD);
	return vfs_get_link(shiftfs_lower_dentry(dentry), done);
}

static const struct inode_operations shiftfs_file_inode_ops = {
	.permission	= shiftfs_permission,
	.getattr	= shiftfs_getattr,
	.setattr	= shiftfs_setattr,
	.listxattr	= shiftfs_listxattr,
	.get_acl	= shiftfs_get_acl,
	.fileattr_get	= shiftfs_fileattr_get,
	.fileattr_set	= shiftfs_fileattr_set,
};

static const struct inode_operations shiftfs_symlink_inode_ops = {
	.get_link	= shiftfs_get_link,
	.getattr	= shiftfs_getattr,
	.setattr	= shiftfs_setattr,
	.listxattr	= shiftfs_listxattr,
};

static const struct inode_operations shiftfs_special_inode_ops = {
	.permission	= shiftfs_permission,
	.getattr	= shiftfs_getattr,
	.setattr	= shiftfs_setattr,
	.listxattr	= shiftfs_listxattr,
	.get_acl	= shiftfs_get_acl,
};
