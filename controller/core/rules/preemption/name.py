"""The preemption rule and the restore that undoes it: their names, written only here:
the specs, every decision and the metrics take them from this module."""

PREEMPTION = "preemption"
RESTORE = "restore"
