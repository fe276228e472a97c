// SPDX-License-Identifier: GPL-2.0-only
/*
 * Regular files: every operation is passed to the lower file opened
 * beside ours.  There is no ioctl beyond FS_IOC_GETFLAGS/SETFLAGS
 * (served by fileattr_get/set): nothing that takes a file descriptor
 * from the caller ever reaches the lower filesystem.
 */
#include "shiftfs.h"

#include <linux/fadvise.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/splice.h>
#include <linux/uio.h>

/* Open flags that only mean something to the open that created us. */
#define SHIFTFS_OPEN_DROP	(O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | \
				 __O_TMPFILE)

int shiftfs_open_lower(struct inode *inode, struct file *file)
{
	struct file *lower;
	struct path path;

	/*
	 * Not f_path: overlayfs opens us with its own path on top, and only
	 * file_dentry() gives back our dentry then.
	 */
	shiftfs_lower_path(file_dentry(file), &path);
	lower = dentry_open(&path, file->f_flags & ~SHIFTFS_OPEN_DROP,
			    current_cred());
	if (IS_ERR(lower))
		return PTR_ERR(lower);
	if (lower->f_mode & FMODE_CAN_ODIRECT)
		file->f_mode |= FMODE_CAN_ODIRECT;
	file->private_data = lower;
	return 0;
}

int shiftfs_release(struct inode *inode, struct file *file)
{
	fput(shiftfs_lower_file(file));
	return 0;
}

/* The per-call flags the lower honours; the rest are in its f_flags. */
static rwf_t shiftfs_iocb_to_rwf(int ifl)
{
	rwf_t flags = 0;

	if (ifl & IOCB_HIPRI)
		flags |= RWF_HIPRI;
	if (ifl & IOCB_DSYNC)
		flags |= RWF_DSYNC;
	if (ifl & IOCB_SYNC)
		flags |= RWF_SYNC;
	return flags;
}

static ssize_t shiftfs_read_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	struct file *lower = shiftfs_lower_file(iocb->ki_filp);

	if (!iov_iter_count(iter))
		return 0;
	return vfs_iter_read(lower, iter, &iocb->ki_pos,
			     shiftfs_iocb_to_rwf(iocb->ki_flags));
}

/* Our inode lock orders writers so the size we copy back is theirs. */
static ssize_t shiftfs_write_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	struct file *file = iocb->ki_filp;
	struct file *lower = shiftfs_lower_file(file);
	struct inode *inode = file_inode(file);
	ssize_t ret;

	if (!iov_iter_count(iter))
		return 0;
	inode_lock(inode);
	file_start_write(lower);
	ret = vfs_iter_write(lower, iter, &iocb->ki_pos,
			     shiftfs_iocb_to_rwf(iocb->ki_flags));
	file_end_write(lower);
	/* Size, times, and the setuid bits the lower dropped. */
	shiftfs_copyattr(inode);
	inode_unlock(inode);
	return ret;
}

/* The mapping is the lower file's: faults never come to us. */
static int shiftfs_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct file *lower = shiftfs_lower_file(file);

	if (!lower->f_op->mmap)
		return -ENODEV;
	if (WARN_ON(file != vma->vm_file))
		return -EIO;
	vma_set_file(vma, lower);
	return call_mmap(lower, vma);
}

static int shiftfs_fsync(struct file *file, loff_t start, loff_t end,
			 int datasync)
{
	return vfs_fsync_range(shiftfs_lower_file(file), start, end, datasync);
}

static long shiftfs_fallocate(struct file *file, int mode, loff_t offset,
			      loff_t len)
{
	struct inode *inode = file_inode(file);
	long ret;

	inode_lock(inode);
	ret = vfs_fallocate(shiftfs_lower_file(file), mode, offset, len);
	shiftfs_copyattr(inode);
	inode_unlock(inode);
	return ret;
}

static int shiftfs_fadvise(struct file *file, loff_t offset, loff_t len,
			   int advice)
{
	return vfs_fadvise(shiftfs_lower_file(file), offset, len, advice);
}

/* Our f_pos is the master copy; only the lower knows its size and holes. */
static loff_t shiftfs_llseek(struct file *file, loff_t offset, int whence)
{
	struct file *lower = shiftfs_lower_file(file);
	struct inode *inode = file_inode(file);
	loff_t ret;

	inode_lock(inode);
	lower->f_pos = file->f_pos;
	ret = vfs_llseek(lower, offset, whence);
	file->f_pos = lower->f_pos;
	inode_unlock(inode);
	return ret;
}

static ssize_t shiftfs_copy_file_range(struct file *in, loff_t pos_in,
				       struct file *out, loff_t pos_out,
				       size_t len, unsigned int flags)
{
	struct inode *inode = file_inode(out);
	ssize_t ret;

	inode_lock(inode);
	ret = vfs_copy_file_range(shiftfs_lower_file(in), pos_in,
				  shiftfs_lower_file(out), pos_out, len, flags);
	shiftfs_copyattr(inode);
	inode_unlock(inode);
	return ret;
}

const struct file_operations shiftfs_file_ops = {
	.open		= shiftfs_open_lower,
	.release	= shiftfs_release,
	.llseek		= shiftfs_llseek,
	.read_iter	= shiftfs_read_iter,
	.write_iter	= shiftfs_write_iter,
	.mmap		= shiftfs_mmap,
	.fsync		= shiftfs_fsync,
	.fallocate	= shiftfs_fallocate,
	.fadvise	= shiftfs_fadvise,
	.splice_read	= generic_file_splice_read,
	.splice_write	= iter_file_splice_write,
	.copy_file_range = shiftfs_copy_file_range,
};
