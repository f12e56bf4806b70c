"""Where each managed service should run, and how to steer Swarm there."""
