"""Docker API in and out: snapshot converters and version-checked writes."""
