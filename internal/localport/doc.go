// Package localport hands out loopback ports that a process can count on
// getting back: ports below the kernel's ephemeral range.
//
// A replica's address is part of its raft configuration, so a replica that
// restarts must listen on the port its data directory was created with. A
// port from the ephemeral range (what "127.0.0.1:0" returns) can be taken
// meanwhile by any outgoing connection on the machine — a peer redialling
// the stopped replica, another test's client — and the restart fails with
// "address already in use". Below the range only explicit binds compete.
//
// localport must never hand out a port it has not bound at that moment,
// and it keeps no state between calls: callers that start several
// processes at once track what they handed out themselves. It is a leaf:
// it imports no trawl package.
package localport
