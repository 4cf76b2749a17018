package e2e

import (
	"fmt"
	"strings"
	"time"
)

// watchDirectory logs every change of the day's window checkpoint and tier-2 rows until the
// returned stop is called: the timeline to read a lost window against.
func (s *scenario) watchDirectory() (stop func()) {
	cfgDone := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		last := ""
		for {
			select {
			case <-cfgDone:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var parts []string
			it := s.db().Query("SELECT first_live_minute, version FROM es_window_checkpoints").Iter()
			var m int
			var v int64
			for it.Scan(&m, &v) {
				parts = append(parts, fmt.Sprintf("cp=%d/v%d", m, v))
			}
			_ = it.Close()
			it = s.db().Query("SELECT minute_of_day FROM es_retry_windows_by_day").Iter()
			var ws []string
			for it.Scan(&m) {
				ws = append(ws, fmt.Sprint(m))
			}
			_ = it.Close()
			it = s.db().Query("SELECT minute_of_day, instance_id FROM es_instances_by_retry_window").Iter()
			var ins []string
			var id string
			for it.Scan(&m, &id) {
				ins = append(ins, fmt.Sprintf("%d:%s", m, id[strings.LastIndexByte(id, '-')+1:]))
			}
			_ = it.Close()
			now := strings.Join(parts, " ") + " windows " + strings.Join(ws, ",") + " instances " + strings.Join(ins, ",")
			if now != last {
				s.t.Logf("%s watch: %s", time.Now().Format("15:04:05.000"), now)
				last = now
			}
		}
	}()
	return func() { close(cfgDone); <-finished }
}
