"""Row normalisation of feature rows (``dataset.feature_normalization``), checked by hand on a 3 x 2 matrix."""

from __future__ import annotations

import pytest
import torch

from suite.data.feature_normalization import FEATURE_NORMALIZATIONS, normalize_features
from suite.errors import ConfigError


def test_row_normalisation_divides_each_row_by_its_sum():
    rows = torch.tensor([[1.0, 3.0], [0.0, 0.0], [2.0, 2.0]], dtype=torch.float16)
    normalised = normalize_features(rows, "row")
    assert normalised.dtype == torch.float32
    assert torch.equal(normalised, torch.tensor([[0.25, 0.75], [0.0, 0.0], [0.5, 0.5]]))


def test_none_keeps_the_rows_as_float32():
    rows = torch.tensor([[1.0, 3.0], [0.0, 5.0]], dtype=torch.float16)
    assert torch.equal(normalize_features(rows, "none"), torch.tensor([[1.0, 3.0], [0.0, 5.0]]))


def test_row_by_row_equals_the_whole_table():
    """A system may normalise at load or per gathered batch: the same rows either way."""
    table = torch.rand(6, 4)
    whole = normalize_features(table, "row")
    assert torch.equal(torch.cat([normalize_features(table[i:i + 2], "row") for i in range(0, 6, 2)]), whole)


def test_unknown_normalisation_is_a_config_error_naming_the_field():
    assert set(FEATURE_NORMALIZATIONS) == {"none", "row"}
    with pytest.raises(ConfigError, match="dataset.feature_normalization: unknown normalisation 'l2'"):
        normalize_features(torch.ones(1, 1), "l2")
