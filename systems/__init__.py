"""Training systems and their parts: samplers (naive, DENSE), models, the in-memory baseline, the pipelined
CPU-GPU system and the disk-based system with partition-buffer policies (see ``../shared/DESIGN.md``)."""
