package collectives

// Stats counts what the calls of a Comm did on the calling rank. Blocks are
// the p blocks of a segment the algorithm cuts the vector into (the paper's
// unit); a flat algorithm counts the 1/p chunks it reads.
type Stats struct {
	Calls    uint64 // collective calls
	Steps    uint64 // steps (segments) run
	Rounds   uint64 // rounds: waits for a peer's phase followed by a read
	Sent     uint64 // blocks made available to a peer
	Received uint64 // blocks read from a peer's slot
	Reduced  uint64 // blocks combined with the operator
}

// Stats returns the counts of the last call (last) and of all calls since
// the Comm was made (total). Counting is a few additions per round.
func (c *Comm) Stats() (last, total Stats) {
	total = c.total
	total.add(c.last)
	return c.last, total
}

func (s *Stats) add(o Stats) {
	s.Calls += o.Calls
	s.Steps += o.Steps
	s.Rounds += o.Rounds
	s.Sent += o.Sent
	s.Received += o.Received
	s.Reduced += o.Reduced
}
