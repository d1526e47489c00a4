"""Graph storage, generation, loading and partitioning."""

from suite.graph.store import CSR, FORMAT_VERSION, GraphStore, StoreWriter, create_store, index_dtype

__all__ = ["CSR", "FORMAT_VERSION", "GraphStore", "StoreWriter", "create_store", "index_dtype"]
