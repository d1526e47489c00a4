"""gnnsuite: resource-efficient GNN training across disk, CPU memory and accelerator."""

__version__ = "0.1.0"
