"""Shared set-up for the Gemmini backend tests.

tests/conftest.py gives every test its own AUTOCOMP_HOME, and the Spike extension is
cached under AUTOCOMP_HOME, so each new backend would rebuild it with g++ (several
seconds). Build it once per test process in a shared folder and hand its path to every
backend through the ``extension`` setting, exactly as a user pointing at a prebuilt
extension would.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from autocomp.backends import get_backend
from autocomp.backends.gemmini import GemminiBackend

_SHARED_HOME = os.path.join(tempfile.gettempdir(), f"autocomp-test-gemmini-{os.getuid()}")
_extension: str | None = None


def extension_path() -> str:
    global _extension
    if _extension is None:
        from autocomp.backends.gemmini.toolchain import GemminiToolchain

        saved = os.environ.get("AUTOCOMP_HOME")
        os.environ["AUTOCOMP_HOME"] = _SHARED_HOME
        try:
            _extension = GemminiToolchain.discover({}).extension
        finally:
            if saved is None:
                os.environ.pop("AUTOCOMP_HOME", None)
            else:
                os.environ["AUTOCOMP_HOME"] = saved
    return _extension


def backend(**settings: Any) -> GemminiBackend:
    """A Gemmini backend using the shared prebuilt extension."""
    b = get_backend("gemmini", {"extension": extension_path(), **settings})
    assert isinstance(b, GemminiBackend)
    return b


# An honest 32x32x32 int8 GEMM on the short-name-free gemmini.h API: the original kernel of the
# verdict tests and the attack suite.
GEMM32 = """\
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "include/gemmini.h"

#define DIM_I 32
#define DIM_J 32
#define DIM_K 32

void gemm(const elem_t A[DIM_I][DIM_K], const elem_t B[DIM_K][DIM_J], elem_t C[DIM_I][DIM_J]) {
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended3_config_ld(DIM_K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(DIM_J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_config_st(DIM_J);
  for (int i = 0; i < DIM_I / DIM; i++)
    for (int j = 0; j < DIM_J / DIM; j++) {
      for (int k = 0; k < DIM_K / DIM; k++) {
        gemmini_extended_mvin(&A[i * DIM][k * DIM], 0, DIM, DIM);
        gemmini_extended_mvin2(&B[k * DIM][j * DIM], DIM, DIM, DIM);
        gemmini_extended_preload(DIM, (1u << 31) | (k ? 1u << 30 : 0), DIM, DIM, DIM, DIM);
        gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i * DIM][j * DIM], 1u << 31, DIM, DIM);
    }
}
"""
