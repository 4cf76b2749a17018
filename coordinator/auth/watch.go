package auth

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// watchedFile is a file the node re-reads every second (Kubernetes updates a mounted Secret in
// place). A read or parse that fails keeps the last good content and logs one error line per
// distinct failure; each change that takes effect, and a return to the content in force after a
// failure, logs one info line. The first load must succeed.
type watchedFile[T any] struct {
	what string // the flag
	path string
	// parse turns the content into T; its error names what is wrong, the path is added here.
	parse func([]byte) (*T, error)
	log   zerolog.Logger
	// summary, if set, says what a content holds ("3 tokens for 2 rings") in the lines that log a load.
	summary func(v *T) string

	cur     atomic.Pointer[T]
	mu      sync.Mutex
	sum     [sha256.Size]byte
	lastErr string
}

func (w *watchedFile[T]) read() ([]byte, error) {
	f, err := os.Open(w.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAuthFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxAuthFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxAuthFileBytes)
	}
	return b, nil
}

// load reads the file for the first time: its error stops the node from starting.
func (w *watchedFile[T]) load() error {
	if err := w.check(); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrBadFile, w.what, w.path, err)
	}
	return nil
}

// check re-reads the file; it changes the content in force only when the file changed and parses.
func (w *watchedFile[T]) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := w.read()
	var sum [sha256.Size]byte
	if err == nil {
		sum = sha256.Sum256(b)
		if cur := w.cur.Load(); cur != nil && sum == w.sum {
			if w.lastErr != "" {
				// A broken edit was undone: say the file is usable again, once.
				w.log.Info().Str("flag", w.what).Str("path", w.path).
					Msgf("%s %s is usable again, as it was: %s still in force", w.what, w.path, w.describe(cur))
			}
			w.lastErr = ""
			return nil
		}
	}
	var v *T
	if err == nil {
		v, err = w.parse(b)
	}
	if err != nil {
		if w.cur.Load() != nil && err.Error() != w.lastErr {
			w.log.Error().Str("flag", w.what).Str("path", w.path).Str("error", err.Error()).
				Msgf("cannot use the changed %s %s: %v; keeping the last good content", w.what, w.path, err)
		}
		w.lastErr = err.Error()
		return err
	}
	w.sum, w.lastErr = sum, ""
	verb := "loaded"
	if w.cur.Swap(v) != nil {
		verb = "reloaded"
	}
	w.log.Info().Str("flag", w.what).Str("path", w.path).Bool("reloaded", verb == "reloaded").
		Msgf("%s %s %s: %s", verb, w.what, w.path, w.describe(v))
	return nil
}

func (w *watchedFile[T]) describe(v *T) string {
	if w.summary == nil {
		return "in force"
	}
	return w.summary(v)
}
