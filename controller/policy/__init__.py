"""The policy model: file rules and placement.* labels resolved into per-service settings."""
