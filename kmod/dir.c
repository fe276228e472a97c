// SPDX-License-Identifier: GPL-2.0-only
/* Directory operations: create, link, remove, rename, tmpfile, readdir. */
#include "shiftfs.h"

#include <linux/file.h>
#include <linux/namei.h>

/* Looks a name up in a locked lower directory; refuses stale views. */
static struct dentry *shiftfs_lookup_locked(struct shiftfs_sb_info *sbi,
					    struct dentry *lower_parent,
					    struct dentry *dentry)
{
	struct dentry *lower;
	struct inode *expect = d_inode(dentry) ?
			       shiftfs_lower_inode(d_inode(dentry)) : NULL;

	lower = shiftfs_vfs_lookup(SHIFTFS_IDMAP(sbi), &dentry->d_name,
				   lower_parent);
	if (IS_ERR(lower))
		return lower;
	/* The lower changed since our lookup: let the VFS look again. */
	if (d_inode(lower) != expect) {
		dput(lower);
		return ERR_PTR(-ESTALE);
	}
	return lower;
}

static int shiftfs_do_create(struct shiftfs_sb_info *sbi, struct inode *dir,
			     struct dentry *lower, umode_t mode, dev_t rdev,
			     const char *link)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return shiftfs_vfs_create(SHIFTFS_IDMAP(sbi), dir, lower, mode);
	case S_IFDIR:
		return shiftfs_vfs_mkdir(SHIFTFS_IDMAP(sbi), dir, lower, mode);
	case S_IFLNK:
		return shiftfs_vfs_symlink(SHIFTFS_IDMAP(sbi), dir, lower, link);
	default:
		return shiftfs_vfs_mknod(SHIFTFS_IDMAP(sbi), dir, lower, mode,
					 rdev);
	}
}

/*
 * The lower creates the object with the caller's credentials through
 * the idmapping, so it checks permission, picks the owner (setgid
 * directories included) and strips the mode as an idmapped mount does.
 */
static int shiftfs_create_object(struct inode *dir, struct dentry *dentry,
				 umode_t mode, dev_t rdev, const char *link)
{
	struct super_block *sb = dir->i_sb;
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct dentry *lower_parent = shiftfs_lower_dentry(dentry->d_parent);
	struct inode *lower_dir = d_inode(lower_parent);
	struct dentry *lower;
	int err;

	err = shiftfs_want_write(sb);
	if (err)
		return err;
	inode_lock_nested(lower_dir, I_MUTEX_PARENT);
	lower = shiftfs_lookup_locked(sbi, lower_parent, dentry);
	err = PTR_ERR(lower);
	if (IS_ERR(lower))
		goto out_unlock;

	err = shiftfs_do_create(sbi, lower_dir, lower, mode, rdev, link);
	if (err)
		goto out_dput;
	err = shiftfs_fixup_owner(sb, lower_dir, lower);
	if (err)
		goto out_dput;
	err = shiftfs_instantiate(dentry, lower);
	if (!err)
		lower = NULL;
out_dput:
	dput(lower);
out_unlock:
	shiftfs_copyattr(dir);
	inode_unlock(lower_dir);
	shiftfs_drop_write(sb);
	return err;
}

static int shiftfs_create(shiftfs_mnt_t *mnt, struct inode *dir,
			  struct dentry *dentry, umode_t mode, bool excl)
{
	return shiftfs_create_object(dir, dentry, (mode & 07777) | S_IFREG,
				     0, NULL);
}

static int shiftfs_mkdir(shiftfs_mnt_t *mnt, struct inode *dir,
			 struct dentry *dentry, umode_t mode)
{
	return shiftfs_create_object(dir, dentry, (mode & 07777) | S_IFDIR,
				     0, NULL);
}

static int shiftfs_mknod(shiftfs_mnt_t *mnt, struct inode *dir,
			 struct dentry *dentry, umode_t mode, dev_t rdev)
{
	return shiftfs_create_object(dir, dentry, mode, rdev, NULL);
}

static int shiftfs_symlink(shiftfs_mnt_t *mnt, struct inode *dir,
			   struct dentry *dentry, const char *link)
{
	return shiftfs_create_object(dir, dentry, S_IFLNK | 0777, 0, link);
}

/* A new name for the same lower inode, so the same shiftfs inode. */
static int shiftfs_link(struct dentry *old, struct inode *dir,
			struct dentry *new)
{
	struct super_block *sb = dir->i_sb;
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct dentry *lower_parent = shiftfs_lower_dentry(new->d_parent);
	struct inode *lower_dir = d_inode(lower_parent);
	struct inode *inode = d_inode(old);
	struct dentry *lower;
	int err;

	err = shiftfs_want_write(sb);
	if (err)
		return err;
	inode_lock_nested(lower_dir, I_MUTEX_PARENT);
	lower = shiftfs_lookup_locked(sbi, lower_parent, new);
	err = PTR_ERR(lower);
	if (IS_ERR(lower))
		goto out_unlock;

	err = shiftfs_vfs_link(SHIFTFS_IDMAP(sbi), shiftfs_lower_dentry(old),
			       lower_dir, lower);
	if (err)
		goto out_dput;
	ihold(inode);
	shiftfs_copyattr(inode);
	new->d_fsdata = lower;
	d_instantiate(new, inode);
	lower = NULL;
out_dput:
	dput(lower);
out_unlock:
	shiftfs_copyattr(dir);
	inode_unlock(lower_dir);
	shiftfs_drop_write(sb);
	return err;
}

static int shiftfs_remove(struct inode *dir, struct dentry *dentry,
			  bool is_dir)
{
	struct super_block *sb = dir->i_sb;
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct dentry *lower_parent = shiftfs_lower_dentry(dentry->d_parent);
	struct inode *lower_dir = d_inode(lower_parent);
	struct dentry *lower;
	int err;

	err = shiftfs_want_write(sb);
	if (err)
		return err;
	inode_lock_nested(lower_dir, I_MUTEX_PARENT);
	lower = shiftfs_lookup_locked(sbi, lower_parent, dentry);
	err = PTR_ERR(lower);
	if (IS_ERR(lower))
		goto out_unlock;

	if (is_dir)
		err = shiftfs_vfs_rmdir(SHIFTFS_IDMAP(sbi), lower_dir, lower);
	else
		err = shiftfs_vfs_unlink(SHIFTFS_IDMAP(sbi), lower_dir, lower);
	shiftfs_copyattr(d_inode(dentry));
	dput(lower);
out_unlock:
	shiftfs_copyattr(dir);
	inode_unlock(lower_dir);
	shiftfs_drop_write(sb);
	return err;
}

static int shiftfs_unlink(struct inode *dir, struct dentry *dentry)
{
	return shiftfs_remove(dir, dentry, false);
}

static int shiftfs_rmdir(struct inode *dir, struct dentry *dentry)
{
	return shiftfs_remove(dir, dentry, true);
}

/* The whiteout the lower left in old's place needs its owner too. */
static int shiftfs_fixup_whiteout(struct super_block *sb,
				  struct dentry *lower_parent,
				  struct dentry *old)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct dentry *wh;
	int err;

	if (!sbi->fixup)
		return 0;
	wh = shiftfs_vfs_lookup(SHIFTFS_IDMAP(sbi), &old->d_name, lower_parent);
	if (IS_ERR(wh))
		return PTR_ERR(wh);
	err = d_is_positive(wh) ?
	      shiftfs_fixup_owner(sb, d_inode(lower_parent), wh) : 0;
	dput(wh);
	return err;
}

struct shiftfs_rename {
	struct dentry *old_parent, *new_parent;	/* lower */
	struct dentry *old, *new;		/* lower */
};

/*
 * Every flag goes down as given: RENAME_EXCHANGE must stay an exchange
 * (a plain rename would destroy the target), RENAME_WHITEOUT must leave
 * its whiteout, RENAME_NOREPLACE must fail on an existing target.
 */
static int shiftfs_do_rename(struct super_block *sb, struct shiftfs_rename *r,
			     struct dentry *old, struct dentry *new,
			     unsigned int flags)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct dentry *trap;
	int err;

	trap = lock_rename(r->new_parent, r->old_parent);
	r->old = shiftfs_lookup_locked(sbi, r->old_parent, old);
	err = PTR_ERR(r->old);
	if (IS_ERR(r->old))
		goto out_unlock;
	err = -EINVAL;
	if (r->old == trap)
		goto out_dput_old;
	r->new = shiftfs_lookup_locked(sbi, r->new_parent, new);
	err = PTR_ERR(r->new);
	if (IS_ERR(r->new))
		goto out_dput_old;
	err = -ENOTEMPTY;
	if (r->new == trap)
		goto out_dput_new;

	err = shiftfs_vfs_rename(SHIFTFS_IDMAP(sbi), d_inode(r->old_parent),
				 r->old, d_inode(r->new_parent), r->new, flags);
	if (!err && (flags & RENAME_WHITEOUT))
		err = shiftfs_fixup_whiteout(sb, r->old_parent, old);
out_dput_new:
	dput(r->new);
out_dput_old:
	dput(r->old);
out_unlock:
	unlock_rename(r->new_parent, r->old_parent);
	return err;
}

static int shiftfs_rename(shiftfs_mnt_t *mnt, struct inode *olddir,
			  struct dentry *old, struct inode *newdir,
			  struct dentry *new, unsigned int flags)
{
	struct super_block *sb = olddir->i_sb;
	struct shiftfs_rename r = {
		.old_parent = shiftfs_lower_dentry(old->d_parent),
		.new_parent = shiftfs_lower_dentry(new->d_parent),
	};
	int err;

	err = shiftfs_want_write(sb);
	if (err)
		return err;
	err = shiftfs_do_rename(sb, &r, old, new, flags);
	shiftfs_drop_write(sb);

	shiftfs_copyattr(olddir);
	if (newdir != olddir)
		shiftfs_copyattr(newdir);
	shiftfs_copyattr(d_inode(old));
	if (d_inode(new))
		shiftfs_copyattr(d_inode(new));
	return err;
}

/*
 * O_TMPFILE: the lower makes its unnamed inode (linkable unless
 * O_EXCL); our file is then opened on it like any other.
 */
static int shiftfs_tmpfile(shiftfs_mnt_t *mnt, struct inode *dir,
			   struct file *file, umode_t mode)
{
	struct super_block *sb = dir->i_sb;
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct dentry *dentry = file->f_path.dentry;
	struct path parent;
	struct file *lower_file;
	struct dentry *lower;
	int err;

	shiftfs_lower_path(dentry->d_parent, &parent);
	err = shiftfs_want_write(sb);
	if (err)
		return err;
	lower_file = shiftfs_vfs_tmpfile_open(SHIFTFS_IDMAP(sbi), &parent,
					      mode, file->f_flags);
	err = PTR_ERR(lower_file);
	if (IS_ERR(lower_file))
		goto out_drop_write;

	lower = dget(lower_file->f_path.dentry);
	err = shiftfs_fixup_owner(sb, d_inode(parent.dentry), lower);
	if (!err)
		err = shiftfs_instantiate(dentry, lower);
	if (err)
		dput(lower);
	fput(lower_file);
	if (!err)
		err = finish_open_simple(file, 0);
out_drop_write:
	shiftfs_drop_write(sb);
	return err;
}

static int shiftfs_iterate(struct file *file, struct dir_context *ctx)
{
	struct file *lower = shiftfs_lower_file(file);
	int err;

	/* The lower restarts from our position (seekdir, rewinddir). */
	lower->f_pos = ctx->pos;
	err = iterate_dir(lower, ctx);
	file->f_pos = lower->f_pos;
	return err;
}

/* Our f_pos is the master copy; the lower knows what it means. */
static loff_t shiftfs_dir_llseek(struct file *file, loff_t offset, int whence)
{
	struct file *lower = shiftfs_lower_file(file);
	loff_t ret;

	lower->f_pos = file->f_pos;
	ret = vfs_llseek(lower, offset, whence);
	file->f_pos = lower->f_pos;
	return ret;
}

static int shiftfs_dir_fsync(struct file *file, loff_t start, loff_t end,
			     int datasync)
{
	return vfs_fsync_range(shiftfs_lower_file(file), start, end, datasync);
}

const struct file_operations shiftfs_dir_ops = {
	.open		= shiftfs_open_lower,
	.release	= shiftfs_release,
	.read		= generic_read_dir,
	.iterate_shared	= shiftfs_iterate,
	.llseek		= shiftfs_dir_llseek,
	.fsync		= shiftfs_dir_fsync,
};

const struct inode_operations shiftfs_dir_inode_ops = {
	.lookup		= shiftfs_lookup,
	.create		= shiftfs_create,
	.mkdir		= shiftfs_mkdir,
	.mknod		= shiftfs_mknod,
	.symlink	= shiftfs_symlink,
	.link		= shiftfs_link,
	.unlink		= shiftfs_unlink,
	.rmdir		= shiftfs_rmdir,
	.rename		= shiftfs_rename,
	.tmpfile	= shiftfs_tmpfile,
	.permission	= shiftfs_permission,
	.getattr	= shiftfs_getattr,
	.setattr	= shiftfs_setattr,
	.listxattr	= shiftfs_listxattr,
	.get_acl	= shiftfs_get_acl,
	.fileattr_get	= shiftfs_fileattr_get,
	.fileattr_set	= shiftfs_fileattr_set,
};
