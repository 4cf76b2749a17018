package proc

import "bytes"

// statState is the state letter (R, S, T, t, Z...) of the content of a /proc/<pid>/stat or
// /proc/<pid>/task/<tid>/stat file: the first field after the command name, which stands in
// parentheses and may itself hold blanks and parentheses, hence the last ')'. ok is false for a
// content that has no state there.
func statState(stat []byte) (state byte, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, false
	}
	return stat[i+2], true
}
