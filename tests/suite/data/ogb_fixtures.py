"""Tiny datasets in OGB's on-disk layout (what ogb leaves after a download), for offline loader tests.

Each builder writes ``<root>/<dir_name>/`` with ``RELEASE_v1.txt``, ``raw/`` and ``split/<split_type>/`` as the
installed ogb expects, so that ``NodePropPredDataset`` / ``LinkPropPredDataset`` find everything and never try
to download. The builders return the arrays they wrote, for checks by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch


def _csv(path: Path, values: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(np.asarray(values)).to_csv(path, header=False, index=False, compression="gzip")


def _folder(root: Path, dir_name: str) -> Path:
    folder = root / dir_name
    (folder / "raw").mkdir(parents=True)
    (folder / "RELEASE_v1.txt").write_text("# Release 1\n")
    return folder


def _csv_graph(raw: Path, num_nodes: int, edges: np.ndarray) -> None:
    _csv(raw / "edge.csv.gz", edges)
    _csv(raw / "num-node-list.csv.gz", [num_nodes])
    _csv(raw / "num-edge-list.csv.gz", [len(edges)])


def make_ogbn_arxiv(root: Path) -> dict[str, np.ndarray]:
    """A 10-node directed ``ogbn-arxiv``: CSV files, float features, years, labels, time split."""
    folder = _folder(root, "ogbn_arxiv")
    n = 10
    edges = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 6], [6, 7], [7, 8], [8, 9], [9, 0], [2, 5],
                      [0, 1]])  # the repeated 0->1 must stay (no deduplication)
    features = (np.arange(n * 4, dtype=np.float64).reshape(n, 4) + 0.5) / 8
    labels = np.array([3, 0, 39, 1, 2, 3, 0, 1, 2, 3])
    years = np.arange(2010, 2020)
    _csv_graph(folder / "raw", n, edges)
    _csv(folder / "raw" / "node-feat.csv.gz", features)
    _csv(folder / "raw" / "node-label.csv.gz", labels[:, None])
    _csv(folder / "raw" / "node_year.csv.gz", years[:, None])
    splits = {"train": np.array([0, 1, 2, 3, 4, 5]), "valid": np.array([6, 7]), "test": np.array([8, 9])}
    for key, index in splits.items():
        _csv(folder / "split" / "time" / f"{key}.csv.gz", index[:, None])
    return {"edges": edges, "features": features, "labels": labels, "years": years, **splits}


def make_ogbn_papers100m(root: Path) -> dict[str, np.ndarray]:
    """An 8-node ``ogbn-papers100M``: binary ``data.npz``, NaN labels, ``split_dict.pt`` of numpy arrays."""
    folder = _folder(root, "ogbn_papers100M")
    n = 8
    edges = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 1], [1, 2, 3, 4, 5, 6, 7, 0, 7]], dtype=np.int64)
    features = np.linspace(-1, 1, n * 3, dtype=np.float32).reshape(n, 3)
    labels = np.array([[5.0], [np.nan], [171.0], [np.nan], [0.0], [np.nan], [1.0], [2.0]])
    np.savez(folder / "raw" / "data.npz", edge_index=edges, num_nodes_list=np.array([n]),
             num_edges_list=np.array([edges.shape[1]]), node_feat=features,
             node_year=np.arange(n, dtype=np.int64)[:, None] + 2000)
    np.savez(folder / "raw" / "node-label.npz", node_label=labels)
    splits = {"train": np.array([0, 2, 4]), "valid": np.array([6]), "test": np.array([7])}
    (folder / "split" / "time").mkdir(parents=True)
    torch.save(splits, folder / "split" / "time" / "split_dict.pt")
    return {"edges": edges, "features": features, "labels": labels, **splits}


def make_ogbl_collab(root: Path) -> dict[str, np.ndarray]:
    """A 6-node undirected ``ogbl-collab``: training edges stored once (ogb adds inverses), edge_neg pairs."""
    folder = _folder(root, "ogbl_collab")
    n = 6
    train = np.array([[0, 1], [1, 2], [2, 3], [0, 1]])  # a repeated collaboration (another year)
    weight, year = np.array([1, 2, 1, 1]), np.array([2010, 2011, 2012, 2015])
    _csv_graph(folder / "raw", n, train)
    _csv(folder / "raw" / "node-feat.csv.gz", np.arange(n * 2, dtype=np.float64).reshape(n, 2) / 4 + 0.25)
    _csv(folder / "raw" / "edge_weight.csv.gz", weight[:, None])
    _csv(folder / "raw" / "edge_year.csv.gz", year[:, None])
    valid, valid_neg = np.array([[3, 4]]), np.array([[0, 5], [1, 5]])
    test, test_neg = np.array([[4, 5], [0, 2]]), np.array([[2, 5], [3, 0], [1, 4]])
    split = folder / "split" / "time"
    split.mkdir(parents=True)
    tensor = torch.from_numpy
    torch.save({"edge": tensor(train), "weight": tensor(weight), "year": tensor(year)}, split / "train.pt")
    torch.save({"edge": tensor(valid), "weight": torch.ones(1, dtype=torch.int64),
                "year": torch.full((1,), 2018), "edge_neg": tensor(valid_neg)}, split / "valid.pt")
    torch.save({"edge": tensor(test), "weight": torch.ones(2, dtype=torch.int64),
                "year": torch.full((2,), 2019), "edge_neg": tensor(test_neg)}, split / "test.pt")
    return {"train": train, "valid": valid, "valid_neg": valid_neg, "test": test, "test_neg": test_neg,
            "weight": weight, "year": year}


def make_ogbl_citation2(root: Path) -> dict[str, np.ndarray]:
    """A 7-node directed ``ogbl-citation2``: split files of numpy arrays with ``target_node_neg`` candidates."""
    folder = _folder(root, "ogbl_citation2")
    n = 7
    train = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]])
    _csv_graph(folder / "raw", n, train)
    _csv(folder / "raw" / "node-feat.csv.gz", np.ones((n, 3)) * 0.5)
    _csv(folder / "raw" / "node_year.csv.gz", (np.arange(n) + 1990)[:, None])
    valid, test = np.array([[5, 0]]), np.array([[6, 1], [6, 2]])
    valid_neg = np.array([[1, 2, 3, 4]])
    test_neg = np.array([[0, 3, 4, 5], [0, 1, 3, 5]])
    split = folder / "split" / "time"
    split.mkdir(parents=True)
    torch.save({"source_node": train[:, 0], "target_node": train[:, 1]}, split / "train.pt")
    torch.save({"source_node": valid[:, 0], "target_node": valid[:, 1], "target_node_neg": valid_neg},
               split / "valid.pt")
    torch.save({"source_node": test[:, 0], "target_node": test[:, 1], "target_node_neg": test_neg},
               split / "test.pt")
    return {"train": train, "valid": valid, "test": test, "valid_neg": valid_neg, "test_neg": test_neg}


def make_ogbl_wikikg2(root: Path) -> dict[str, np.ndarray]:
    """A 6-entity, 3-relation ``ogbl-wikikg2``: typed edges, ``head_neg`` / ``tail_neg`` candidates."""
    folder = _folder(root, "ogbl_wikikg2")
    n = 6
    train = np.array([[0, 0, 1], [1, 2, 2], [2, 1, 3], [0, 0, 1], [4, 1, 5]])  # (head, relation, tail)
    _csv_graph(folder / "raw", n, train[:, [0, 2]])
    _csv(folder / "raw" / "edge_reltype.csv.gz", train[:, 1:2])
    valid, test = np.array([[3, 2, 4]]), np.array([[5, 0, 0], [1, 1, 4]])
    head_neg = {"valid": np.array([[0, 1, 2]]), "test": np.array([[1, 2, 3], [0, 2, 5]])}
    tail_neg = {"valid": np.array([[5, 0, 1]]), "test": np.array([[2, 3, 4], [0, 3, 5]])}
    split = folder / "split" / "time"
    split.mkdir(parents=True)

    def part(triples: np.ndarray) -> dict[str, torch.Tensor]:
        return {"head": torch.from_numpy(triples[:, 0]), "relation": torch.from_numpy(triples[:, 1]),
                "tail": torch.from_numpy(triples[:, 2])}

    torch.save(part(train), split / "train.pt")
    for key, triples in (("valid", valid), ("test", test)):
        torch.save({**part(triples), "head_neg": torch.from_numpy(head_neg[key]),
                    "tail_neg": torch.from_numpy(tail_neg[key])}, split / f"{key}.pt")
    return {"train": train, "valid": valid, "test": test, "valid_head_neg": head_neg["valid"],
            "valid_tail_neg": tail_neg["valid"], "test_head_neg": head_neg["test"], "test_tail_neg": tail_neg["test"]}
