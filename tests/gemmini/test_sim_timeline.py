"""The model's shared resources are booked out of time order (see sim/timeline.h): each request
must get the first free gap at or after its own time, whatever was booked before it.

These run the header itself, compiled with the host g++ (the compiler that builds the Spike
extension), so they need neither Spike nor the RISC-V toolchain."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SIM_DIR = Path(__file__).resolve().parents[2] / "backends/gemmini/sim"

PROGRAM = r"""
#include <cstdio>
#include "timeline.h"
using autocomp_gemmini::Timeline;
static int failures = 0;
#define EXPECT(cond) do { if (!(cond)) { std::printf("FAIL line %d: %s\n", __LINE__, #cond); failures++; } } while (0)
int main() {
  {  // a later request booked first does not delay an earlier one booked after it
    Timeline bus;
    EXPECT(bus.reserve(5000, 8) == 5000);
    EXPECT(bus.reserve(100, 8) == 100);
    EXPECT(bus.reserve(104, 8) == 108);   // overlaps the one at 100: served after it
    EXPECT(bus.reserve(4996, 8) == 5008); // does not fit before 5000: after it
  }
  {  // a request takes the first gap that fits it, not the first gap
    Timeline sm;
    sm.reserve(0, 10);
    sm.reserve(15, 10);                   // [0,10) [15,25)
    EXPECT(sm.reserve(2, 9) == 25);       // the 5-cycle gap is too short
    EXPECT(sm.reserve(2, 5) == 10);       // this one fits it exactly
    EXPECT(sm.earliest(0, 1) == 34);      // [0,34) is now booked through
  }
  {  // booking an occupancy known after the fact merges what it overlaps
    Timeline mshr;
    mshr.book(100, 200);
    mshr.book(300, 400);
    mshr.book(150, 350);
    EXPECT(mshr.intervals() == 1);
    EXPECT(mshr.earliest(120, 10) == 400);
    EXPECT(mshr.earliest(0, 100) == 0);   // free before it
    EXPECT(mshr.earliest(0, 101) == 400);
  }
  {  // long runs stay bounded: intervals far behind the latest booking are dropped
    Timeline t;
    for (unsigned long long i = 0; i < 100000; i++) t.reserve(i * 20, 10);
    EXPECT(t.intervals() < 10000);
    EXPECT(t.reserve(100000ull * 20 - 15, 10) == 100000ull * 20 - 10);  // after the last one
  }
  std::printf("%d failures\n", failures);
  return failures != 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (apt-get install g++)")
def test_timeline_books_each_request_at_its_own_time(tmp_path):
    src = tmp_path / "timeline_test.cc"
    src.write_text(PROGRAM)
    exe = tmp_path / "timeline_test"
    subprocess.run(["g++", "-std=c++20", "-O1", f"-I{SIM_DIR}", str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
