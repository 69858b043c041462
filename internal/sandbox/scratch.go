package sandbox

import (
	"io/fs"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

// entryCharge is what creating a file or directory costs against the scratch quota, so
// a module cannot exhaust the host's inodes with empty files while staying under the
// byte limit.
const entryCharge = 4096

// ownerDirBits are kept on every scratch directory so the engine can empty and remove it.
const ownerDirBits fs.FileMode = 0o700

// scratchQuota counts the bytes a call has written into its scratch directory.
type scratchQuota struct {
	limit int64
	used  atomic.Int64
}

// charge reserves n bytes, or reports false (and reserves nothing) when they would
// take the call past its limit.
func (q *scratchQuota) charge(n int64) bool {
	for {
		used := q.used.Load()
		if n > q.limit-used {
			return false
		}
		if q.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// scratchFS is the per-call scratch directory as the module sees it: wazero's directory
// file system with two hardenings.
//
//   - Symlink is refused. wazero's DirFS resolves paths with the host's open(2), which
//     follows symlinks, so a module able to create "x -> ../../../etc/passwd" could read
//     or write anything the service can. The directory starts empty and the module can
//     create no symlink, so every path it opens stays inside the directory. Hard links
//     stay allowed: both ends are resolved inside the directory.
//   - Writes are metered against a quota and fail with EIO past it (wazero's errno set
//     has no ENOSPC), so a module cannot fill the host's disk.
//   - Permissions are masked to 0o777, so no setuid or setgid file can be left behind,
//     and directories always keep their owner's rwx bits, so a module cannot make its
//     scratch directory impossible for the engine to remove.
type scratchFS struct {
	experimentalsys.FS
	quota *scratchQuota
}

// newScratchFS wraps the host directory dir.
func newScratchFS(dir string, limit int64) *scratchFS {
	return &scratchFS{FS: sysfs.DirFS(dir), quota: &scratchQuota{limit: limit}}
}

// OpenFile charges for a newly created file and returns a metered file.
func (s *scratchFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if flag&experimentalsys.O_CREAT != 0 {
		if _, errno := s.FS.Lstat(path); errno == experimentalsys.ENOENT && !s.quota.charge(entryCharge) {
			return nil, experimentalsys.EIO
		}
	}
	f, errno := s.FS.OpenFile(path, flag, perm&fs.ModePerm)
	if errno != 0 {
		return nil, errno
	}
	return &quotaFile{File: f, quota: s.quota}, 0
}

// Mkdir charges for the new directory, which its owner can always traverse.
func (s *scratchFS) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	if !s.quota.charge(entryCharge) {
		return experimentalsys.EIO
	}
	return s.FS.Mkdir(path, perm&fs.ModePerm|ownerDirBits)
}

// Chmod applies only the permission bits, keeping a directory's owner bits.
func (s *scratchFS) Chmod(path string, perm fs.FileMode) experimentalsys.Errno {
	perm &= fs.ModePerm
	if st, errno := s.FS.Lstat(path); errno == 0 && st.Mode.IsDir() {
		perm |= ownerDirBits
	}
	return s.FS.Chmod(path, perm)
}

// Symlink is refused: see scratchFS.
func (s *scratchFS) Symlink(_, _ string) experimentalsys.Errno {
	return experimentalsys.EPERM
}

// quotaFile meters the data written through it.
type quotaFile struct {
	experimentalsys.File
	quota *scratchQuota
}

// Write writes buf if the quota allows all of it.
func (f *quotaFile) Write(buf []byte) (int, experimentalsys.Errno) {
	if !f.quota.charge(int64(len(buf))) {
		return 0, experimentalsys.EIO
	}
	return f.File.Write(buf)
}

// Pwrite writes buf at off if the quota allows all of it.
func (f *quotaFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if !f.quota.charge(int64(len(buf))) {
		return 0, experimentalsys.EIO
	}
	return f.File.Pwrite(buf, off)
}

// Truncate refuses sizes beyond the whole quota; extending a file this way allocates no
// disk (the file is sparse) but a later copy of it would.
func (f *quotaFile) Truncate(size int64) experimentalsys.Errno {
	if size > f.quota.limit {
		return experimentalsys.EIO
	}
	return f.File.Truncate(size)
}
