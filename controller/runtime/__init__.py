"""The imperative shell: event watch, resync timer, one reconcile worker, tracing."""
