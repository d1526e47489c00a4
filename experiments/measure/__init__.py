"""Side measurements: timings and tables that back the documentation, the claims and the simulators (microbenchmarks of
this machine), but draw no figure of reproduce."""
