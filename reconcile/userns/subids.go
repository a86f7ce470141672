package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ReadSubIDs reads the node's range from the entries for user in the
// subordinate id files (/etc/subuid and /etc/subgid), as kubelet reads its
// own user's ("kubelet") through getsubids: one entry in each, the same
// range in both, a valid NodeRange. ok is false when neither file names
// the user (kubelet then takes DefaultNodeRange).
func ReadSubIDs(user, subuidPath, subgidPath string) (r NodeRange, ok bool, err error) {
	uids, err := subIDEntries(subuidPath, user)
	if err != nil {
		return NodeRange{}, false, err
	}
	gids, err := subIDEntries(subgidPath, user)
	if err != nil {
		return NodeRange{}, false, err
	}
	if len(uids) == 0 && len(gids) == 0 {
		return NodeRange{}, false, nil
	}
	if len(uids) != 1 || len(gids) != 1 {
		return NodeRange{}, false, fmt.Errorf("user %q needs exactly one range in %s and in %s, has %d and %d", user, subuidPath, subgidPath, len(uids), len(gids))
	}
	if uids[0] != gids[0] {
		return NodeRange{}, false, fmt.Errorf("subordinate ids of user %q differ for uids (%s) and gids (%s)", user, subuidPath, subgidPath)
	}
	if err := uids[0].Validate(); err != nil {
		return NodeRange{}, false, fmt.Errorf("%s, user %q: %w", subuidPath, user, err)
	}
	return uids[0], true, nil
}

// subIDEntries are the ranges ("user:first:count" lines) of user in the
// file at path; none when the file does not exist.
func subIDEntries(path, user string) ([]NodeRange, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []NodeRange
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) != 3 || f[0] != user {
			continue
		}
		first, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: malformed entry %q", path, sc.Text())
		}
		out = append(out, NodeRange{First: uint32(first), Length: uint32(count)})
	}
	return out, sc.Err()
}
