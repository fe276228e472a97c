// SPDX-License-Identifier: GPL-2.0-or-later

// gotar writes a tar of a directory with Go's archive/tar, as Go image
// tools do: gotar DIR FORMAT > OUT, FORMAT one of default, pax, gnu.
// Owners, devices, hard links and xattrs (as SCHILY.xattr records)
// are kept.
package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func xattrs(path string) map[string]string {
	recs := map[string]string{}
	buf := make([]byte, 65536)
	n, err := syscall.Listxattr(path, buf)
	if err != nil {
		return recs
	}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" {
			continue
		}
		val := make([]byte, 65536)
		m, err := syscall.Getxattr(path, name, val)
		if err == nil {
			recs["SCHILY.xattr."+name] = string(val[:m])
		}
	}
	return recs
}

func main() {
	root := os.Args[1]
	w := tar.NewWriter(os.Stdout)
	format := tar.FormatUnknown
	switch os.Args[2] {
	case "pax":
		format = tar.FormatPAX
	case "gnu":
		format = tar.FormatGNU
	}
	seen := map[uint64]string{}
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			link, _ = os.Readlink(path)
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		st := fi.Sys().(*syscall.Stat_t)
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = format
		if format != tar.FormatGNU && fi.Mode()&os.ModeSymlink == 0 {
			hdr.PAXRecords = xattrs(path)
		}
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			if first, ok := seen[st.Ino]; ok {
				hdr.Typeflag = tar.TypeLink
				hdr.Linkname = first
				hdr.Size = 0
			} else {
				seen[st.Ino] = rel
			}
		}
		if err := w.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(w, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		os.Stderr.WriteString("gotar: " + err.Error() + "\n")
		os.Exit(1)
	}
}
