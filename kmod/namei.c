// SPDX-License-Identifier: GPL-2.0-only
/* Lookup and dentry revalidation. */
#include "shiftfs.h"

#include <linux/namei.h>

struct dentry *shiftfs_lookup(struct inode *dir, struct dentry *dentry,
			      unsigned int flags)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(dir->i_sb);
	struct dentry *lower_parent = shiftfs_lower_dentry(dentry->d_parent);
	struct dentry *lower;
	struct inode *inode;

	/* The lower checks MAY_EXEC on its directory through the idmapping. */
	lower = shiftfs_vfs_lookup_unlocked(SHIFTFS_IDMAP(sbi),
					    &dentry->d_name, lower_parent);
	if (IS_ERR(lower))
		return ERR_CAST(lower);

	/*
	 * Negative dentries keep no lower reference: revalidation sends
	 * them back here, so a name created on the lower shows up.
	 */
	if (d_is_negative(lower)) {
		dput(lower);
		return d_splice_alias(NULL, dentry);
	}

	inode = shiftfs_iget(dir->i_sb, d_inode(lower));
	if (IS_ERR(inode)) {
		dput(lower);
		return ERR_CAST(inode);
	}
	dentry->d_fsdata = lower;
	return d_splice_alias(inode, dentry);
}

/* A rename below keeps the lower dentry hashed, under its new name. */
static bool shiftfs_same_name(const struct dentry *dentry,
			      struct dentry *lower, bool rcu)
{
	unsigned int seq;
	bool same;

	if (!rcu) {
		spin_lock(&lower->d_lock);
		same = lower->d_name.len == dentry->d_name.len &&
		       !memcmp(lower->d_name.name, dentry->d_name.name,
			       dentry->d_name.len);
		spin_unlock(&lower->d_lock);
		return same;
	}
	/* d_seq moves on every rename: a changing name is not trusted. */
	seq = raw_seqcount_begin(&lower->d_seq);
	same = READ_ONCE(lower->d_name.len) == dentry->d_name.len &&
	       !memcmp(READ_ONCE(lower->d_name.name), dentry->d_name.name,
		       dentry->d_name.len);
	if (read_seqcount_retry(&lower->d_seq, seq))
		return false;
	return same;
}

/*
 * Our dentry is good while its lower dentry still names the same inode
 * under the same parent and name; the lower tree may change behind our
 * back.
 */
static int shiftfs_d_revalidate(struct dentry *dentry, unsigned int flags)
{
	struct dentry *lower = READ_ONCE(dentry->d_fsdata);
	struct inode *inode = d_inode_rcu(dentry);
	struct dentry *parent;

	if (!lower || !inode)
		return 0;
	if (d_unhashed(lower) || d_is_negative(lower) ||
	    d_inode_rcu(lower) != shiftfs_lower_inode(inode))
		return 0;
	if (!IS_ROOT(dentry)) {
		parent = READ_ONCE(dentry->d_parent);
		if (READ_ONCE(lower->d_parent) != READ_ONCE(parent->d_fsdata))
			return 0;
		if (!shiftfs_same_name(dentry, lower, flags & LOOKUP_RCU))
			return (flags & LOOKUP_RCU) ? -ECHILD : 0;
	}
	if (!(lower->d_flags & DCACHE_OP_REVALIDATE))
		return 1;
	if (flags & LOOKUP_RCU)
		return -ECHILD;
	return lower->d_op->d_revalidate(lower, flags);
}

static void shiftfs_d_release(struct dentry *dentry)
{
	dput(dentry->d_fsdata);
}

const struct dentry_operations shiftfs_dentry_ops = {
	.d_revalidate	= shiftfs_d_revalidate,
	.d_release	= shiftfs_d_release,
};
