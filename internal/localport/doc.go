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
// Below the range, the explicit binds that compete are each other's: test
// processes that go test runs side by side, each starting and restarting
// clusters. So a port Listen hands out is also reserved for the life of
// the process, by a lock file in the system's temporary directory that
// every caller of Listen on the machine respects; a restart then finds its
// port free however long its server was down.
//
// localport must never hand out a port it has not bound at that moment.
// The reservations are its only state: no memory of its own between calls
// (callers that start several processes at once track what they handed
// out themselves), one open file per port. It is a leaf: it imports no
// trawl package.
package localport
