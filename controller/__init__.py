"""Swarm Placement Controller: placement policy for Docker Swarm."""

__version__ = "0.1.0"
