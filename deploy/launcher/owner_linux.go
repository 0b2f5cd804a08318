package launcher

import (
	"fmt"
	"os"
	"syscall"
)

// folderOwner is the uid and gid owning dir, or nil when this process
// could not give a file away anyway (it is not root).
func folderOwner(dir string) (*[2]int, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("read the owner of %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, nil
	}
	return &[2]int{int(st.Uid), int(st.Gid)}, nil
}
