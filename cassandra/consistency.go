package cassandra

import "github.com/gocql/gocql"

// Consistency is the consistency level the Store's statements run at: its session's default (no
// statement of the Store overrides it, except the compare-and-sets' serial phase).
func (s *Store) Consistency() gocql.Consistency {
	q := s.session.Query("")
	defer q.Release()
	return q.GetConsistency()
}
