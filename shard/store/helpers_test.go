package store

var place = Placement{Fingerprint: "fp1", Shard: "shard-0"}
