"""Out-of-range addresses and illegal configurations stop the run with a message that names
the command (never a crash or a silent wrap); harness markers outside the harness are
refused; depthwise loop_conv_ws with more than one channel per call says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simkit import run_c  # noqa: E402

CASES = {
    "mvin_sp_row": ("gemmini_config_ld(DIM); gemmini_mvin(buf, BANK_NUM * BANK_ROWS - 8);", "mvin: scratchpad rows 16376..16391 out of range"),
    "mvin_acc_row": ("gemmini_config_ld(64); gemmini_extended_mvin(buf, (1u << 31) | 1020, DIM, 8);", "mvin: accumulator rows 1020..1027 out of range"),
    "mvin_cols": ("gemmini_config_ld(DIM); gemmini_extended_mvin(buf, 0, 65, 1);", "mvin: 65 columns exceed the 64-column limit"),
    "mvin_acc_cols": ("gemmini_config_ld(DIM); gemmini_extended_mvin(buf, 1u << 31, 17, 1);", "mvin: 17 columns exceed the 16-column limit"),
    "mvin2_dram": ("gemmini_config_ld(DIM); gemmini_extended_mvin2(0x10, 0, DIM, DIM);", "mvin2: DRAM range 0x10"),
    "mvin_rows": ("gemmini_config_ld(DIM); gemmini_extended_mvin(buf, 0, DIM, DIM + 1);", "mvin: 17 rows exceed DIM=16"),
    "mvout_rows": ("gemmini_config_st(DIM); gemmini_extended_mvout(buf, 0, DIM, DIM + 1);", "mvout: 17 rows exceed DIM=16"),
    "mvin_stride_wrap": ("gemmini_config_ld(1ull << 63); gemmini_extended_mvin(buf, 0, DIM, 3);", "mvin: DRAM row stride 9223372036854775808 bytes is larger than target memory"),
    "mvin_zero_rows": ("gemmini_config_ld(DIM); gemmini_extended_mvin(buf, 0, DIM, 0);", "mvin: rows (0) and cols (16)"),
    "mvin_garbage": ("gemmini_config_ld(DIM); gemmini_extended_mvin(buf, GARBAGE_ADDR, DIM, DIM);", "mvin: local address is GARBAGE_ADDR"),
    "mvout_acc_row": ("gemmini_config_st(DIM); gemmini_mvout(buf, (1u << 31) | 1016);", "mvout: accumulator rows 1016..1031 out of range"),
    "mvout_dram": ("gemmini_config_st(DIM); gemmini_mvout(0x1000, 0);", "mvout: DRAM range 0x1000"),
    "compute_no_preload": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_compute_preloaded(0, GARBAGE_ADDR);", "compute_preloaded: no preload before the first compute"),
    "compute_big": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_preload(0, 1u << 31); gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, 17, 16, 16, 16);", "compute_preloaded: A operand is 16x17"),
    "preload_c_row": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_preload(0, (1u << 31) | 1020);", "preload: accumulator rows 1020..1035 out of range"),
    "config_ex_act": ("gemmini_config_ex(WEIGHT_STATIONARY, IGELU, 0);", "config_ex: activation 3 is not on this build"),
    "config_st_act": ("gemmini_extended_config_st(DIM, IGELU, 1.0f);", "config_st: activation 3 is not on this build"),
    "preload_acc_operand": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_preload(1u << 31, GARBAGE_ADDR);", "preload: the B/D operand is accumulator address 0x80000000: feeding the array from the accumulator does not work"),
    "compute_acc_bias": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_preload(0, GARBAGE_ADDR); gemmini_compute_preloaded(0, 1u << 31);", "compute_preloaded: operand B/D is accumulator address 0x80000000: feeding the array from the accumulator does not work"),
    "config_ld_id": ("gemmini_extended3_config_ld(DIM, 1.0, false, 3);", "config_ld: load state id 3 out of range"),
    "loop_ws_acc": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_loop_ws(8, 8, 1, 0, 0, 0, buf, buf, NULL, buf, 16, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0);", "loop_ws: I*J*DIM = 1024 accumulator rows exceed half the accumulator"),
    "loop_ws_os": ("gemmini_config_ex(OUTPUT_STATIONARY, 0, 0); gemmini_loop_ws(1, 1, 1, 0, 0, 0, buf, buf, NULL, buf, 16, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0);", "loop_ws: loop_ws needs the WEIGHT_STATIONARY dataflow"),
    "loop_ws_resadd": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_loop_ws(8, 8, 0, 0, 0, 0, buf, buf, NULL, buf, 16, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 1);", "loop_ws: I*J*DIM = 1024 accumulator rows exceed half the accumulator"),
    "loop_ws_overlap": ("gemmini_config_ex(WEIGHT_STATIONARY, 0, 0); gemmini_loop_ws(4, 4, 70, 0, 0, 0, buf, buf, NULL, buf, 16, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0);", "loop_ws: A tiles"),
    "loop_conv_ws": ("gemmini_loop_conv_ws(1,8,8,16,16,8,8,8,8,1,1,3,1,0,0,0,1,8,8,16,3,3,16,0,0,0,0,0,0,0,0,8,8,buf,buf,NULL,buf,1,1,0,0,0,0,0,0,0,0,0,16,16,16,1,0,0);", "loop_conv_ws: depthwise mode (dw=1) takes one channel per call (kchs=16, pochs=16; both must be 1)"),
    "loop_conv_ws_acc": ("gemmini_loop_conv_ws(1,30,30,16,16,30,30,30,30,1,1,3,1,0,0,0,1,30,30,16,3,3,16,1,1,1,1,0,0,0,0,30,30,buf,buf,NULL,buf,1,1,0,0,0,0,0,0,0,0,1,16,16,16,0,0,0);", "loop_conv_ws: the output tile needs 900 accumulator rows"),
    "harness_marker": ("AUTOCOMP_MEASURE_BEGIN();", "measure_begin: harness command at pc"),
    "harness_snapshot": ("AUTOCOMP_SNAPSHOT();", "snapshot: harness command at pc"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_illegal_command_stops_with_named_error(tmp_path, name):
    stmt, expected = CASES[name]
    run = run_c(tmp_path, r"""
static elem_t buf[64 * 64] row_align(1);
int main(void) {
  for (int i = 0; i < 64 * 64; i++) buf[i] = (elem_t)i;
  """ + stmt + r"""
  gemmini_fence();
  printf("not reached\n");
  return 0;
}
""")
    assert expected in run.error, run.error
    assert "not reached" not in run.stdout
    assert run.exit_code is None
    assert run.cycles is None
