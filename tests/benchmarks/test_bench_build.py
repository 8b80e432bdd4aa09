"""`make bench-build`'s input planning: both shapes reach the target size."""

import pytest

from benchmarks.build_ooc import SHAPES, plan_input


@pytest.mark.parametrize("target", [1 << 30, 4 << 30, 8 << 30])
def test_inputs_reach_the_target_and_igb_is_feature_dominated(target):
    for shape in SHAPES:
        scale, edge_factor, dim = plan_input(shape, target)
        n = 1 << scale
        features, edges = n * dim * 4, n * edge_factor * 16
        assert features + edges + n * 8 >= target, shape
        if shape == "igb":
            assert (dim, edge_factor) == (1024, 13)
            assert features > 0.9 * (features + edges), "IGB's bytes are nearly all features"
            # The smallest power-of-two graph that reaches the target.
            assert (n // 2) * (dim * 4 + 8 + 16 * edge_factor) < target
        else:
            assert edges > 2 * features, "the edges shape is edge-dominated"
