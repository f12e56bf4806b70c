"""The functional core: plan(snapshot, policy, memory, now) -> Plan. No I/O, no clock."""
