"""YUYV bytes compared as the YUYV tests compare them (tests/test_yuv_pack.py,
tests/test_virtual_camera.py): the largest difference in levels, and the bound on it."""

import numpy as np

# The YUYV pass's bytes against yuv_pack.yuyv_reference: the reference rounds the exact
# value to the nearest level; GL computes in 32-bit floats and converts each to one of
# the two nearest integers (OpenGL's conversion to normalized fixed point), so a byte may
# come out one level off, never more (tests/test_yuv_pack.py's docstring).
YUYV_TOLERANCE = 1


def worst_difference(got: np.ndarray, expected: np.ndarray) -> int:
    return int(np.abs(got.astype(int) - expected.astype(int)).max())
