"""Simulators and analyses: the SimPy pipeline simulator, the partition-buffer/IO simulator, the asynchronous
micro/macro GNN pipeline simulator and the work-depth analysis of GNN models."""
