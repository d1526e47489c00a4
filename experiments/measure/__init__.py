"""Side measurements that feed the simulators and the figures (microbenchmarks of this machine)."""
