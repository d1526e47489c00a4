"""Side measurements: timings and tables that back the documentation and the claims but draw no figure of reproduce."""
