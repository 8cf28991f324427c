// Package outstream is the sending side of an attach stream, at every hop
// that forwards an agent's output to a client (the holder, supervisord's
// relay): the data frames, each client's byte-bounded backlog (Queue), and
// a Writer that hands a Unix socket only what it can take without
// blocking. So a hop decides that a client is slow from the client's
// backlog, never from a write that blocks, and can always tell it so in
// one whole error frame (docs/supervisord.md, "Attach").
package outstream
