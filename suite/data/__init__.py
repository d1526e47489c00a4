"""Graph storage, generation, loading and partitioning."""

from suite.data.store import CSR, FORMAT_VERSION, GraphStore, StoreWriter, create_store, index_dtype
from suite.data import partition  # noqa: E402,F401  (registers the partitioned layout's check in LAYOUT_CHECKS)

__all__ = ["CSR", "FORMAT_VERSION", "GraphStore", "StoreWriter", "create_store", "index_dtype"]
