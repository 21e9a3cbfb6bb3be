"""One timeline from many sources: clocks, hosts, identities, topology, filters."""
