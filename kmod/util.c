// SPDX-License-Identifier: GPL-2.0-only
/* Small helpers: attribute copies, write access, owner fix-ups. */
#include "shiftfs.h"

#include <linux/cred.h>
#include <linux/posix_acl_xattr.h>

/* Flags that change what the VFS allows on our inode. */
#define SHIFTFS_COPY_I_FLAGS	(S_SYNC | S_APPEND | S_IMMUTABLE)

/*
 * Our inode mirrors the lower one with the ids seen through the mounting
 * namespace; the VFS checks (immutable, unmapped ids, sizes) run on it.
 * Times are the lower's business: S_NOATIME | S_NOCMTIME keep the VFS
 * from updating our copies behind the lower filesystem's back.
 */
void shiftfs_copyattr(struct inode *inode)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(inode->i_sb);
	struct inode *lower = shiftfs_lower_inode(inode);

	inode->i_uid = shiftfs_kuid_up(sbi->userns, sbi->lower_ns,
				       lower->i_uid);
	inode->i_gid = shiftfs_kgid_up(sbi->userns, sbi->lower_ns,
				       lower->i_gid);
	inode->i_mode = lower->i_mode;
	inode->i_atime = lower->i_atime;
	inode->i_mtime = lower->i_mtime;
	inode->i_ctime = lower->i_ctime;
	inode->i_rdev = lower->i_rdev;
	inode->i_blkbits = lower->i_blkbits;
	i_size_write(inode, i_size_read(lower));
	set_nlink(inode, lower->i_nlink);
	inode->i_flags = (lower->i_flags & SHIFTFS_COPY_I_FLAGS) |
			 S_NOATIME | S_NOCMTIME;
}

void shiftfs_lower_path(const struct dentry *dentry, struct path *path)
{
	path->mnt = shiftfs_sbi(dentry->d_sb)->lower.mnt;
	path->dentry = shiftfs_lower_dentry(dentry);
}

/*
 * The VFS took write access on our mount; the lower mount has its own
 * read-only state and freeze protection.
 */
int shiftfs_want_write(struct super_block *sb)
{
	return mnt_want_write(shiftfs_sbi(sb)->lower.mnt);
}

void shiftfs_drop_write(struct super_block *sb)
{
	mnt_drop_write(shiftfs_sbi(sb)->lower.mnt);
}

/* The caller's filesystem ids as they are stored on the lower. */
static int shiftfs_fsids_down(const struct shiftfs_sb_info *sbi, kuid_t *uid,
			      kgid_t *gid)
{
	*uid = shiftfs_kuid_down(sbi->userns, sbi->lower_ns, current_fsuid());
	*gid = shiftfs_kgid_down(sbi->userns, sbi->lower_ns, current_fsgid());
	if (!uid_valid(*uid) || !gid_valid(*gid))
		return -EOVERFLOW;
	return 0;
}

/*
 * A new lower inode whose filesystem ignored the idmapping got the
 * caller's kuid; give it the owner an idmapped mount would have stored.
 * A setgid directory's group was inherited as stored, so it stays.
 */
int shiftfs_fixup_owner(struct super_block *sb, struct inode *lower_dir,
			struct dentry *lower)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	struct iattr attr = { .ia_valid = ATTR_UID | ATTR_GID | ATTR_FORCE };
	kuid_t uid;
	kgid_t gid;
	int err;

	if (!sbi->fixup)
		return 0;
	err = shiftfs_fsids_down(sbi, &uid, &gid);
	if (err)
		return err;
	if (lower_dir->i_mode & S_ISGID)
		gid = d_inode(lower)->i_gid;
	shiftfs_iattr_set_ids(&attr, uid, gid);

	inode_lock(d_inode(lower));
	err = shiftfs_vfs_setattr(SHIFTFS_NOIDMAP, lower, &attr);
	inode_unlock(d_inode(lower));
	return err;
}

/*
 * setattr on a lower that ignores the idmapping.  The caller checked
 * the change on our inode (setattr_prepare), which holds the ids as the
 * mounting namespace sees them; here the ids are stored as an idmapped
 * mount would store them.  The lower still applies its own setgid rule
 * on chmod against the caller's fsgid, so it runs with the caller's
 * fsuid/fsgid translated the same way.
 */
int shiftfs_do_setattr_forced(struct super_block *sb, struct dentry *lower,
			      struct iattr *attr)
{
	struct shiftfs_sb_info *sbi = shiftfs_sbi(sb);
	kuid_t uid = INVALID_UID, fsuid;
	kgid_t gid = INVALID_GID, fsgid;
	const struct cred *old;
	struct cred *cred;
	int err;

	if (attr->ia_valid & ATTR_UID) {
		uid = shiftfs_kuid_down(sbi->userns, sbi->lower_ns,
					shiftfs_iattr_uid(attr));
		if (!uid_valid(uid))
			return -EOVERFLOW;
	}
	if (attr->ia_valid & ATTR_GID) {
		gid = shiftfs_kgid_down(sbi->userns, sbi->lower_ns,
					shiftfs_iattr_gid(attr));
		if (!gid_valid(gid))
			return -EOVERFLOW;
	}
	shiftfs_iattr_set_ids(attr, uid, gid);
	attr->ia_valid |= ATTR_FORCE;
	attr->ia_valid &= ~ATTR_TOUCH;

	err = shiftfs_fsids_down(sbi, &fsuid, &fsgid);
	if (err)
		return err;
	cred = prepare_creds();
	if (!cred)
		return -ENOMEM;
	cred->fsuid = fsuid;
	cred->fsgid = fsgid;
	old = override_creds(cred);
	err = shiftfs_vfs_setattr(SHIFTFS_NOIDMAP, lower, attr);
	revert_creds(old);
	put_cred(cred);
	return err;
}

bool shiftfs_is_acl_xattr(const char *name)
{
	return !strcmp(name, XATTR_NAME_POSIX_ACL_ACCESS) ||
	       !strcmp(name, XATTR_NAME_POSIX_ACL_DEFAULT);
}

/*
 * An ACL read raw from the lower carries stored ids; the VFS expects
 * kuids/kgids here (it maps them into the caller's namespace after us).
 * Only the bytes the lower returned are touched, whatever the buffer
 * size was.
 */
void shiftfs_acl_xattr_up(const struct shiftfs_sb_info *sbi, void *value,
			  size_t size)
{
	struct posix_acl_xattr_header *header = value;
	struct posix_acl_xattr_entry *entry = (void *)(header + 1), *end;
	kuid_t uid;
	kgid_t gid;

	if (size < sizeof(*header) ||
	    (size - sizeof(*header)) % sizeof(*entry) ||
	    header->a_version != cpu_to_le32(POSIX_ACL_XATTR_VERSION))
		return;

	end = entry + (size - sizeof(*header)) / sizeof(*entry);
	for (; entry != end; entry++) {
		switch (le16_to_cpu(entry->e_tag)) {
		case ACL_USER:
			uid = shiftfs_kuid_up(sbi->userns, sbi->lower_ns,
				KUIDT_INIT(le32_to_cpu(entry->e_id)));
			entry->e_id = cpu_to_le32(__kuid_val(uid));
			break;
		case ACL_GROUP:
			gid = shiftfs_kgid_up(sbi->userns, sbi->lower_ns,
				KGIDT_INIT(le32_to_cpu(entry->e_id)));
			entry->e_id = cpu_to_le32(__kgid_val(gid));
			break;
		}
	}
}
