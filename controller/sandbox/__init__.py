"""A real multi-node swarm on one machine: dockerd processes in network namespaces."""
