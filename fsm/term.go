package fsm

import (
	"errors"
	"fmt"
)

// InTerm is a command of one stretch of leadership: Entry (an encoded command, never an InTerm
// itself) applies only in a log entry of the Raft term Term, the term the stretch leads in. A
// leader deposed and elected again before it noticed may still have a stretch of the earlier
// term running, whose decisions rest on a send log that lacks the leases the intervening leader
// sent; what it proposes then commits in the later term, and the FSM refuses it (ErrStaleTerm)
// instead of crediting it to the stretch that proposed it.
//
// It is a type of its own, introduced by FSM version 5, rather than a field of every body: a node
// of version 4 would ignore an unknown JSON field and apply a command its peers refuse, and its
// state would part from theirs. The version gate keeps it out until every voter runs version 5;
// a node that meets it anyway halts (FSM.Halted).
type InTerm struct {
	Term  uint64 `json:"term"`
	Entry []byte `json:"entry"`
}

// Type implements Command.
func (InTerm) Type() CommandType { return TypeInTerm }

// ErrStaleTerm: an InTerm entry committed in a Raft term other than its own: the stretch of
// leadership that proposed it had ended. Nothing was changed.
var ErrStaleTerm = errors.New("fsm: command of an earlier leadership stretch committed in a later raft term")

// NewInTerm wraps c as a command of the stretch of leadership of Raft term term.
func NewInTerm(term uint64, c Command) (*InTerm, error) {
	if _, ok := c.(*InTerm); ok {
		return nil, fmt.Errorf("%w: an in_term entry inside another", ErrMalformed)
	}
	entry, err := Encode(c)
	if err != nil {
		return nil, err
	}
	return &InTerm{Term: term, Entry: entry}, nil
}

// open returns the command an InTerm carries, as a node of FSM version v decodes it, when the
// log entry is of term logTerm: ErrStaleTerm if that is not the command's term, ErrMalformed if it
// carries nothing or another InTerm, ErrUnknownCommand if v does not know what it carries.
func (c *InTerm) open(logTerm uint64, v int) (Command, error) {
	if c.Term == 0 {
		return nil, fmt.Errorf("%w: in_term of term 0", ErrMalformed)
	}
	if logTerm != c.Term {
		return nil, fmt.Errorf("%w: proposed in term %d, committed in term %d", ErrStaleTerm, c.Term, logTerm)
	}
	inner, err := decodeAt(c.Entry, v)
	if err != nil {
		return nil, err
	}
	if _, ok := inner.(*InTerm); ok {
		return nil, fmt.Errorf("%w: an in_term entry inside another", ErrMalformed)
	}
	return inner, nil
}
