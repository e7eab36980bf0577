"""FireSim cycle counts of Gemmini's own library on 67 DNN layers (DOSA), against the model.

Imported by ``gemmini_fidelity.py``. Source: the DOSA artifact (Hong et al., "DOSA:
Differentiable Model-Based One-Loop Search for DNN Accelerators", MICRO 2023; ucb-bar/dosa,
``data/firesim_test_data/{dataset,dnn,analytical}.csv``, column ``target.gemmini_auto_cycle``),
read, not copied: only the layer shapes and cycle counts below come from it; the programs are ours.

What was measured (charleshong3/firesim-dosa, chipyard-dosa, gemmini-dosa; gemmini-rocc-tests
branch ``dosa`` at 959b23f, ``gemmini-data-collection``):
- FireSim image ``firesim_rocket_singlecore_16pe4kdummygemmini_nofirstlayer_no_nic_l2_llc4mb_ddr3``:
  a Rocket core and Gemmini's 16x16 array with defaultConfig's queues, reservation station and
  DMA (16 requests in flight, 64-byte requests, 128-bit bus); the arithmetic is a dummy type
  and the hardware scratchpad and accumulator hold 4 MiB, but the library's tiles are chosen
  for the default 256 KiB / 64 KiB (the software's gemmini_params.h: BANK_ROWS 4096,
  ACC_ROWS 1024), so the timed command streams are those of defaultConfig (the model runs them
  with the image's buffers, IMAGE_BUFFERS_KIB, which place the hardware loops' halves); no first-layer
  optimisations; FASED DDR3 FR-FCFS memory with a 4 MiB LLC model.
- Templates ``conv_tilings.c`` / ``matmul_tilings.c``: one ``tiled_conv_auto_inner`` /
  ``tiled_matmul_auto_inner`` call (Gemmini's tile heuristic, WS) timed with rdcycle between
  fences (the tile search included); inputs never written (zeros), no bias, padding kernel/2,
  input rows = output rows x stride (``layers/extract_data_csv.py``); a layer with one output
  column and a 1x1 kernel is a matmul I=P, K=C, J=K. That branch's library predates operand
  reuse (no scratchpad region ids in its loop calls), so our programs define
  GEMMINI_NO_OPERAND_REUSE; its matmuls also take a host path of their own (_DOSA_MATMUL
  below), which our matmul programs reproduce.
- The layers of a network run one after another in one binary over the same static buffers
  (conv_tilings.c: input, weights_mat, output_mat; matmul_tilings.c: full_A, full_B,
  full_C), convolutions and matmuls in separate binaries, in the order of the network's CSV
  (``gemmini-data-collection/artifact/{dnn,analytical,both}/<net>.csv``, the same order in
  all three). Each layer's timed auto call comes right after the previous layers' runs
  (through DOSA's mapping) and finds what they left in the L2 and the LLC: the same buffer
  addresses, with those layers' sizes (the 4 MiB LLC holds several small ones). The first layer of a binary finds them cold:
  ResNet-50's 2048x1000 classifier is alone in its matmul binary and streams its 2 MB of
  weights from DRAM. Each network ran three times (dnn, analytical, both: three binaries
  whose buffers sit at different places in a cache line, LINE_OFFSET), and the median over
  every run is the figure here (min and max alongside: up to 50% apart).
  Our program for a layer starts from cold caches (gemmini_cold_start.py: none of its
  buffers in any cache, as a DOSA binary found them before its first layer), replays the layers run
  before it in its binary (through the library's own tiling, not DOSA's mapping: the same
  data touched in another order) over the same buffers, back until they have touched twice
  the LLC, and times the layer, once per run with that run's buffer offset; a layer that two
  networks hold (after different layers) gets three runs per network, and the figure is the
  median over all of them, as published.
Left out: U-Net's four 2x2 up-convolutions (an even kernel with padding 1 makes the output one
larger than the layer's, so what ran is ambiguous); they are replayed, as DOSA's template
computes them, in the history of the layers after them.
"""

from __future__ import annotations

import math
import statistics

from gemmini_autocomp_shapes import geomean
from gemmini_cold_start import COLD_START

# (kind, batch, in channels C, out channels K, output rows = cols P, kernel R, stride,
#  FireSim cycles: median, min, max)
LAYERS = [
    ('conv', 1, 1, 64, 570, 3, 1, 29643585, 29289824, 29838508),
    ('conv', 1, 3, 64, 112, 7, 2, 2577656, 2577642, 2577699),
    ('conv', 1, 64, 2, 388, 1, 1, 5384873, 5067757, 5404604),
    ('conv', 1, 64, 64, 56, 1, 1, 212475, 186955, 226179),
    ('conv', 1, 64, 64, 56, 3, 1, 538484, 537803, 538764),
    ('conv', 1, 64, 64, 388, 3, 1, 26952298, 26119560, 27039373),
    ('conv', 1, 64, 64, 568, 3, 1, 59891064, 58565173, 60113106),
    ('mm', 1, 64, 128, 128, 1, 1, 6854, 6706, 7405),
    ('conv', 1, 64, 128, 282, 3, 1, 26384188, 26078446, 26957536),
    ('conv', 1, 64, 256, 56, 1, 1, 557954, 510114, 653902),
    ('mm', 1, 128, 64, 128, 1, 1, 7517, 7472, 7690),
    ('conv', 1, 128, 64, 390, 3, 1, 46516715, 44944824, 46800473),
    ('conv', 1, 128, 128, 28, 3, 1, 630513, 628884, 636613),
    ('conv', 1, 128, 128, 28, 3, 2, 649677, 628118, 704030),
    ('conv', 1, 128, 128, 196, 3, 1, 23525391, 22794636, 23613726),
    ('conv', 1, 128, 128, 280, 3, 1, 49175245, 47047413, 49336951),
    ('conv', 1, 128, 256, 138, 3, 1, 23137771, 22583682, 23291913),
    ('conv', 1, 128, 512, 28, 1, 1, 506921, 457001, 587119),
    ('conv', 1, 256, 36, 2, 3, 1, 22865, 22755, 22951),
    ('conv', 1, 256, 36, 4, 3, 1, 28840, 28334, 29062),
    ('conv', 1, 256, 36, 7, 3, 1, 50041, 49966, 50602),
    ('conv', 1, 256, 36, 14, 3, 1, 218610, 218264, 221381),
    ('conv', 1, 256, 36, 28, 3, 1, 550018, 544281, 550605),
    ('conv', 1, 256, 64, 56, 1, 1, 859685, 833367, 909964),
    ('conv', 1, 256, 128, 56, 1, 1, 1273454, 1194556, 1379592),
    ('conv', 1, 256, 128, 198, 3, 1, 49156436, 47562735, 50388210),
    ('conv', 1, 256, 256, 2, 1, 1, 12406, 12232, 14784),
    ('conv', 1, 256, 256, 2, 3, 1, 79140, 78498, 91774),
    ('conv', 1, 256, 256, 2, 3, 2, 152342, 151800, 159552),
    ('conv', 1, 256, 256, 4, 1, 1, 22894, 22740, 24329),
    ('conv', 1, 256, 256, 4, 3, 1, 187512, 187484, 197962),
    ('conv', 1, 256, 256, 7, 3, 1, 206202, 205942, 210199),
    ('conv', 1, 256, 256, 14, 3, 1, 718788, 683380, 756452),
    ('conv', 1, 256, 256, 14, 3, 2, 655953, 596874, 657000),
    ('conv', 1, 256, 256, 28, 3, 1, 2424288, 2424286, 2670974),
    ('conv', 1, 256, 256, 100, 3, 1, 26908064, 24840850, 27914738),
    ('conv', 1, 256, 256, 136, 3, 1, 49378537, 45285721, 51064674),
    ('conv', 1, 256, 512, 28, 1, 2, 2831689, 2452866, 3198599),
    ('conv', 1, 256, 512, 66, 3, 1, 24485190, 22073941, 25567451),
    ('conv', 1, 256, 720, 2, 3, 1, 278520, 277803, 314559),
    ('conv', 1, 256, 720, 4, 3, 1, 404775, 404383, 439509),
    ('conv', 1, 256, 720, 7, 3, 1, 566267, 565835, 586788),
    ('conv', 1, 256, 720, 14, 3, 1, 1770212, 1768363, 1878003),
    ('conv', 1, 256, 720, 28, 3, 1, 6221143, 6219479, 6553251),
    ('conv', 1, 256, 1024, 14, 1, 1, 386739, 343736, 412036),
    ('conv', 1, 512, 128, 28, 1, 1, 632840, 614626, 695342),
    ('conv', 1, 512, 256, 28, 1, 1, 1096338, 987544, 1301980),
    ('conv', 1, 512, 256, 102, 3, 1, 50987851, 49467462, 51369691),
    ('conv', 1, 512, 512, 7, 3, 1, 777828, 777089, 805890),
    ('conv', 1, 512, 512, 7, 3, 2, 1102638, 950713, 1104389),
    ('conv', 1, 512, 512, 52, 3, 1, 30082368, 28036351, 30426382),
    ('conv', 1, 512, 512, 64, 3, 1, 40859712, 40045666, 41315304),
    ('conv', 1, 512, 1024, 14, 1, 2, 1710236, 1272647, 1910279),
    ('conv', 1, 512, 1024, 30, 3, 1, 27125046, 22489167, 27571376),
    ('conv', 1, 512, 2048, 7, 1, 1, 580950, 526394, 586484),
    ('mm', 1, 768, 768, 128, 1, 1, 368984, 345931, 370440),
    ('mm', 1, 768, 3072, 128, 1, 1, 1565908, 1533044, 1623624),
    ('conv', 1, 1024, 256, 14, 1, 1, 530686, 511783, 573768),
    ('conv', 1, 1024, 512, 14, 1, 1, 824885, 739350, 835523),
    ('conv', 1, 1024, 512, 54, 3, 1, 70572017, 61219442, 71080148),
    ('conv', 1, 1024, 1024, 28, 3, 1, 67989353, 54408500, 68375201),
    ('conv', 1, 1024, 2048, 7, 1, 2, 1010835, 864214, 1056582),
    ('conv', 1, 2048, 256, 4, 3, 2, 1928568, 1925950, 2231455),
    ('conv', 1, 2048, 256, 7, 1, 1, 415799, 415675, 427790),
    ('conv', 1, 2048, 512, 7, 1, 1, 649782, 604086, 652535),
    ('mm', 1, 2048, 1000, 1, 1, 1, 510931, 510617, 511246),
    ('mm', 1, 3072, 768, 128, 1, 1, 1532514, 1518059, 1577878),
]

_HEAD = r"""
#define GEMMINI_NO_FIRST_LAYER_OPTIMIZATIONS
#define GEMMINI_NO_OPERAND_REUSE
#include "gemmini.h"
#include "autocomp_harness.h"
"""

# DOSA's branch of the library runs every matmul, its own tiling (tiled_matmul_auto) and DOSA's
# mappings alike, through one tiled_matmul that takes the loop order as a string (gemmini.h,
# branch dosa; read, not copied): it finds each loop's place in the string at run time, derives
# the tile counts and last tiles by run-time division with the array width it is passed, walks a
# seven-deep loop nest (four of whose loops have one trip for a matmul) and calls its per-tile
# routine through a pointer. The upstream library our gemmini.h follows has none of that, so our
# programs would issue the same commands with a third of the host instructions: on the model
# the branch's own header (compiled locally, not committed) spends 740 instructions where ours
# spends 294 on BERT's 128x128x64 (first command 946 cycles into the call, not 366). The code
# below is ours; it does that host work around our library's loop_ws, and the matmul layers and
# mappings run through it. (The convolution path has the same shape on that branch, but its
# loop_conv_ws encoding predates our model's, so the cost could not be checked; convolutions
# keep our library's call.)
_DOSA_MATMUL = r"""
typedef void (*dosa_tile_fn)(const elem_t *a, const elem_t *b, void *c, size_t I, size_t J, size_t K,
                             size_t pad_I, size_t pad_J, size_t pad_K, size_t stride_A, size_t stride_B,
                             size_t stride_C, bool first_k);
static void __attribute__((noinline)) dosa_tile(const elem_t *a, const elem_t *b, void *c, size_t I, size_t J,
                                                size_t K, size_t pad_I, size_t pad_J, size_t pad_K, size_t stride_A,
                                                size_t stride_B, size_t stride_C, bool first_k) {
  gemmini_loop_ws(I, J, K, pad_I, pad_J, pad_K, a, b, NULL, c, stride_A, stride_B, 0, stride_C,
                  false, false, false, false, !first_k, NO_ACTIVATION, 0, 0, false);
}
static int __attribute__((noinline)) dosa_loop_of(const char *order, char dim) {
  int at = 0;
  while (order[at] != 0 && order[at] != dim) at++;
  return 6 - at;  /* the string lists the innermost loop first */
}
static dosa_tile_fn volatile dosa_tile_routine = dosa_tile;
/* C (dim_I x dim_J) = A (dim_I x dim_K) B (dim_K x dim_J), no bias, tiles in blocks of `width`. */
static void __attribute__((noinline)) dosa_tiled_matmul(size_t dim_I, size_t dim_J, size_t dim_K, const elem_t *A,
                                                        const elem_t *B, elem_t *C, size_t stride_A, size_t stride_B,
                                                        size_t stride_C, size_t tile_I, size_t tile_J, size_t tile_K,
                                                        const char *order, int width) {
  const size_t w = (size_t)width;
  const size_t pI = (dim_I / w + (dim_I % w != 0)) * w, pJ = (dim_J / w + (dim_J % w != 0)) * w;
  const size_t pK = (dim_K / w + (dim_K % w != 0)) * w;
  const size_t nI = pI / (tile_I * w) + (pI % (tile_I * w) != 0), nJ = pJ / (tile_J * w) + (pJ % (tile_J * w) != 0);
  const size_t nK = pK / (tile_K * w) + (pK % (tile_K * w) != 0);
  const size_t lastI = pI % (tile_I * w) == 0 ? tile_I : (pI / w) % tile_I;
  const size_t lastJ = pJ % (tile_J * w) == 0 ? tile_J : (pJ / w) % tile_J;
  const size_t lastK = pK % (tile_K * w) == 0 ? tile_K : (pK / w) % tile_K;
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(stride_C, NO_ACTIVATION, ACC_SCALE_IDENTITY);
  gemmini_extended3_config_ld(stride_A, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(stride_B, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(0, MVIN_SCALE_IDENTITY, false, 2);
  static const char dims[7] = {'N', 'Q', 'P', 'K', 'S', 'R', 'C'};
  const size_t trips[7] = {1, 1, nI, nJ, 1, 1, nK};
  int place[7];
  size_t limit[7];
  for (int d = 0; d < 7; d++) {
    place[d] = dosa_loop_of(order, dims[d]);
    limit[place[d]] = trips[d];
  }
  for (size_t v0 = 0; v0 < limit[0]; v0++)
    for (size_t v1 = 0; v1 < limit[1]; v1++)
      for (size_t v2 = 0; v2 < limit[2]; v2++)
        for (size_t v3 = 0; v3 < limit[3]; v3++)
          for (size_t v4 = 0; v4 < limit[4]; v4++)
            for (size_t v5 = 0; v5 < limit[5]; v5++)
              for (size_t v6 = 0; v6 < limit[6]; v6++) {
                const size_t v[7] = {v0, v1, v2, v3, v4, v5, v6};
                const size_t i0 = v[place[2]], j0 = v[place[3]], k0 = v[place[6]];
                const size_t I = i0 < nI - 1 ? tile_I : lastI, J = j0 < nJ - 1 ? tile_J : lastJ;
                const size_t K = k0 < nK - 1 ? tile_K : lastK;
                elem_t *out = k0 == nK - 1 ? C + i0 * tile_I * w * stride_C + j0 * tile_J * w : NULL;
                dosa_tile_routine(A + i0 * tile_I * w * stride_A + k0 * tile_K * w,
                                  B + k0 * tile_K * w * stride_B + j0 * tile_J * w, out, I, J, K,
                                  i0 == nI - 1 ? pI - dim_I : 0, j0 == nJ - 1 ? pJ - dim_J : 0,
                                  k0 == nK - 1 ? pK - dim_K : 0, stride_A, stride_B, stride_C, k0 == 0);
              }
}
/* DOSA's tiled_matmul_auto: the library's tiles, then the routine above in i, j, k order. */
static void __attribute__((noinline)) dosa_tiled_matmul_auto(size_t dim_I, size_t dim_J, size_t dim_K,
                                                             const elem_t *A, const elem_t *B, elem_t *C,
                                                             size_t stride_A, size_t stride_B, size_t stride_C) {
  size_t tI, tJ, tK;
  gemmini_choose_tiles((dim_I + DIM - 1) / DIM, (dim_J + DIM - 1) / DIM, (dim_K + DIM - 1) / DIM, &tI, &tJ, &tK);
  dosa_tiled_matmul(dim_I, dim_J, dim_K, A, B, C, stride_A, stride_B, stride_C, tI, tJ, tK, "CKPQRSN", DIM);
}
"""


# The binaries as DOSA ran them: each network's convolutions (conv_tilings.c) and matmuls
# (matmul_tilings.c), in the CSV's order. Shapes as in LAYERS: (kind, batch, C, K, P, R,
# stride). U-Net's 2x2 up-convolutions are not in LAYERS but precede layers that are.
BINARIES: dict[str, list[tuple]] = {
    "BERT matmuls": [('mm', 1, 768, 768, 128, 1, 1), ('mm', 1, 64, 128, 128, 1, 1),
                     ('mm', 1, 128, 64, 128, 1, 1), ('mm', 1, 768, 3072, 128, 1, 1),
                     ('mm', 1, 3072, 768, 128, 1, 1)],
    "ResNet-50 convolutions": [
        ('conv', 1, 3, 64, 112, 7, 2), ('conv', 1, 64, 64, 56, 1, 1), ('conv', 1, 64, 64, 56, 3, 1),
        ('conv', 1, 64, 256, 56, 1, 1), ('conv', 1, 256, 64, 56, 1, 1), ('conv', 1, 256, 128, 56, 1, 1),
        ('conv', 1, 128, 128, 28, 3, 2), ('conv', 1, 128, 512, 28, 1, 1), ('conv', 1, 256, 512, 28, 1, 2),
        ('conv', 1, 512, 128, 28, 1, 1), ('conv', 1, 128, 128, 28, 3, 1), ('conv', 1, 512, 256, 28, 1, 1),
        ('conv', 1, 256, 256, 14, 3, 2), ('conv', 1, 256, 1024, 14, 1, 1), ('conv', 1, 512, 1024, 14, 1, 2),
        ('conv', 1, 1024, 256, 14, 1, 1), ('conv', 1, 256, 256, 14, 3, 1), ('conv', 1, 1024, 512, 14, 1, 1),
        ('conv', 1, 512, 512, 7, 3, 2), ('conv', 1, 512, 2048, 7, 1, 1), ('conv', 1, 1024, 2048, 7, 1, 2),
        ('conv', 1, 2048, 512, 7, 1, 1), ('conv', 1, 512, 512, 7, 3, 1)],
    "ResNet-50 matmuls": [('mm', 1, 2048, 1000, 1, 1, 1)],
    "RetinaNet convolutions": [
        ('conv', 1, 512, 256, 28, 1, 1), ('conv', 1, 256, 256, 28, 3, 1), ('conv', 1, 256, 720, 28, 3, 1),
        ('conv', 1, 256, 36, 28, 3, 1), ('conv', 1, 1024, 256, 14, 1, 1), ('conv', 1, 256, 256, 14, 3, 1),
        ('conv', 1, 256, 720, 14, 3, 1), ('conv', 1, 256, 36, 14, 3, 1), ('conv', 1, 2048, 256, 7, 1, 1),
        ('conv', 1, 256, 256, 7, 3, 1), ('conv', 1, 256, 720, 7, 3, 1), ('conv', 1, 256, 36, 7, 3, 1),
        ('conv', 1, 2048, 256, 4, 3, 2), ('conv', 1, 256, 256, 4, 1, 1), ('conv', 1, 256, 256, 4, 3, 1),
        ('conv', 1, 256, 720, 4, 3, 1), ('conv', 1, 256, 36, 4, 3, 1), ('conv', 1, 256, 256, 2, 3, 2),
        ('conv', 1, 256, 256, 2, 1, 1), ('conv', 1, 256, 256, 2, 3, 1), ('conv', 1, 256, 720, 2, 3, 1),
        ('conv', 1, 256, 36, 2, 3, 1)],
    "U-Net convolutions": [
        ('conv', 1, 1, 64, 570, 3, 1), ('conv', 1, 64, 64, 568, 3, 1), ('conv', 1, 64, 128, 282, 3, 1),
        ('conv', 1, 128, 128, 280, 3, 1), ('conv', 1, 128, 256, 138, 3, 1), ('conv', 1, 256, 256, 136, 3, 1),
        ('conv', 1, 256, 512, 66, 3, 1), ('conv', 1, 512, 512, 64, 3, 1), ('conv', 1, 512, 1024, 30, 3, 1),
        ('conv', 1, 1024, 1024, 28, 3, 1), ('conv', 1, 1024, 512, 56, 2, 1), ('conv', 1, 1024, 512, 54, 3, 1),
        ('conv', 1, 512, 512, 52, 3, 1), ('conv', 1, 512, 256, 104, 2, 1), ('conv', 1, 512, 256, 102, 3, 1),
        ('conv', 1, 256, 256, 100, 3, 1), ('conv', 1, 256, 128, 200, 2, 1), ('conv', 1, 256, 128, 198, 3, 1),
        ('conv', 1, 128, 128, 196, 3, 1), ('conv', 1, 128, 64, 392, 2, 1), ('conv', 1, 128, 64, 390, 3, 1),
        ('conv', 1, 64, 64, 388, 3, 1), ('conv', 1, 64, 2, 388, 1, 1)],
}


# The image's scratchpad and accumulator in KiB (charleshong3/gemmini-dosa, Configs.scala
# dummyConfig: sp_capacity and acc_capacity CapacityInKilobytes(4096), defaultConfig's banks).
# The software's tiles stay defaultConfig's; the hardware loops split what the hardware has, so
# every DOSA program runs on the model with these (toolchain run(buffers_kib=...)).
IMAGE_BUFFERS_KIB = (4096, 4096)

# The three runs of every network (gemmini-data-collection/artifact/{dnn,analytical,both}): three
# binaries of the same template, differing only in the tables DOSA filled in.
RUNS = ("dnn", "analytical", "both")

# Where each binary's buffers start within a 64-byte line, in bytes, per run. The templates do
# not put them on a line boundary: conv_tilings.c declares `static elem_t input[...]`,
# `weights_mat`, `output_mat` with no alignment (GCC gives a RISC-V array 8 bytes),
# matmul_tilings.c `full_A/B/C` with row_align(1) (gemmini_testutils.h: 16 bytes). Each
# template's buffers are its .bss section's only large objects and their sizes are multiples of
# 64, so all of one binary's buffers share one offset: where riscv-tests' test.ld put .bss, after
# the whole program's text, read-only data and small data. That depends on the binary's code and
# tables, so it differs from run to run of one network, and it matters: a 64-byte row that
# straddles two lines costs the DMA two requests (and 8-byte misalignment a third beat), so the
# same layer in two binaries of one network ran up to 50% apart on FireSim.
# - Rebuilt here (the binaries' compiler was GCC 12.2: chipyard-dosa's conda lock pins
#   ucb-bar riscv-tools 1.0.3, riscv-tools-feedstock a1b1b14, riscv-gnu-toolchain 65056bd
#   "Bump to gcc12"; ours is Debian's 12.2 with newlib's headers), the nine convolution
#   binaries land at 8-byte steps that differ per run, and the two RetinaNet binaries the
#   rebuild puts at one offset (dnn, both; half their mappings differ) timed every library
#   call within 1.5% of each other on FireSim (the third ran up to 21% slower). But the
#   rebuild is not byte-exact (its BERT dnn and analytical binaries share an offset; their
#   FireSim times do not), so the offsets are not read from it.
# - Inferred instead from the per-run FireSim figures (bench/gemmini_dosa_offsets.py): for each
#   binary, the offset at which the model best matches that run's layers. The convolution
#   binaries' offsets are mostly stable when fitted on either half of the layers and predict the other
#   half better than lines do (RMS log error 0.078 against 0.097 over 207 held-out run figures);
#   which of two runs was slower then follows (ResNet's analytical binary on a line and its
#   others 16 bytes in; U-Net's analytical on a line, the others 40 in; RetinaNet's analytical
#   56 in, the others on a line). The matmul binaries' fits disagree between the halves (the
#   model does not reproduce BERT's per-run spread), so they stay on a line.
# - Checked on what the inference never saw: DOSA's own mappings, timed in the same binaries
#   (gemmini_dosa_mapped.py), go from 180 to 203 of 222 within 15% with these offsets.
# sim/MODEL.md, "Where the DOSA binaries' buffers sat", has the evidence; bench/gemmini_calibrate.py
# --line-offset overrides them all.
LINE_OFFSET: dict[str, dict[str, int]] = {
    "BERT matmuls": {"dnn": 0, "analytical": 0, "both": 0},
    "ResNet-50 convolutions": {"dnn": 16, "analytical": 0, "both": 16},
    "ResNet-50 matmuls": {"dnn": 0, "analytical": 0, "both": 0},
    "RetinaNet convolutions": {"dnn": 0, "analytical": 56, "both": 0},
    "U-Net convolutions": {"dnn": 40, "analytical": 0, "both": 40},
}

_NETWORK_NAMES = {"bert": "BERT", "resnet50": "ResNet-50", "retinanet": "RetinaNet", "unet": "U-Net"}


def binary_of(network: str, kind: str) -> str:
    """The key of BINARIES for a layer of kind `kind` ('mm' or 'conv') in the artifact's
    network `network` (its CSV's name: bert, resnet50, retinanet, unet)."""
    return f"{_NETWORK_NAMES[network]} {'matmuls' if kind == 'mm' else 'convolutions'}"


# How far back a layer's history is replayed: layers before it until they have touched twice
# the LLC's 4 MiB (what came earlier is, but for a few lines, gone from the L2 and the LLC).
HISTORY_BYTES = 8 << 20


def histories(shape: tuple, binary: str | None = None) -> list[tuple[tuple, ...]]:
    """What ran before `shape` in each binary that holds it (or only in `binary`, a key of
    BINARIES), oldest first, as far back as HISTORY_BYTES reaches (empty: it came first). The
    LLC keeps several small layers: RetinaNet's 2x2 heads find the weights the 4x4 heads four
    layers earlier left there."""
    found = []
    for key, order in BINARIES.items():
        if binary is not None and key != binary:
            continue
        for n, layer in enumerate(order):
            if layer != tuple(shape):
                continue
            start, touched = n, 0
            while start > 0 and touched < HISTORY_BYTES:
                start -= 1
                touched += sum(_sizes(*order[start]))
            found.append(tuple(order[start:n]))
    if not found:
        raise ValueError(f"{shape} is in no DOSA binary" + (f" named {binary!r}" if binary else ""))
    return found


def conv_dims(p: int, r: int, stride: int) -> tuple[int, int, int]:
    """Input rows, padding and output rows as DOSA's extract_data_csv.py / conv_tilings.c set
    them: input = output x stride, padding kernel/2, output from the usual formula."""
    in_dim, pad = p * stride, r // 2
    return in_dim, pad, (in_dim - r + 2 * pad) // stride + 1


def _sizes(kind: str, batch: int, c: int, k: int, p: int, r: int, stride: int) -> tuple[int, int, int]:
    """Bytes of the three buffers a layer uses (matmul: A, B, C; conv: input, weights, output)."""
    if kind == "mm":
        return p * c, c * k, p * k
    in_dim, _, out = conv_dims(p, r, stride)
    return batch * in_dim * in_dim * c, r * r * c * k, batch * out * out * k


def _call(kind: str, batch: int, c: int, k: int, p: int, r: int, stride: int) -> str:
    """One library call for the layer over the shared buffers X, Y, Z."""
    if kind == "mm":  # through DOSA's host path (_DOSA_MATMUL), our library's commands
        return f"  dosa_tiled_matmul_auto({p}, {k}, {c}, X, Y, Z, {c}, {k}, {k});\n  gemmini_fence();\n"
    in_dim, pad, out = conv_dims(p, r, stride)
    return (f"  tiled_conv_auto({batch}, {in_dim}, {in_dim}, {c}, {k}, {out}, {out}, {stride}, 1, 1, {pad}, {r},\n"
            "                  false, false, false, false, false, X, Y, NULL, Z,\n"
            "                  NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, WS);\n"
            "  gemmini_fence();\n")


def program(kind: str, batch: int, c: int, k: int, p: int, r: int, stride: int,
            history: tuple[tuple, ...] = (), mapped: str | None = None, line_offset: int = 0) -> str:
    """Our program for one layer as one DOSA binary ran it: the layers before it (`history`,
    oldest first; see histories()) run unmeasured over the same buffers from cold caches, then
    the layer is timed. The operands are never written (zeros), as in DOSA's templates.
    `mapped` (C statements over X, Y, Z; see gemmini_dosa_mapped.py) is DOSA's own mapping of
    the layer, timed as a second region right after the library's call, as the templates did
    (the matmul template flushes the TLB between the two; the conv template does not).
    `line_offset`: the buffers start that many bytes into a 64-byte line (see LINE_OFFSET)."""
    shape = (kind, batch, c, k, p, r, stride)
    sizes = [max(column) for column in zip(*(_sizes(*layer) for layer in (*history, shape)))]
    warm = "".join(f"  /* {name(*layer)}, run before it in the binary */\n" + _call(*layer) for layer in history)
    # The matmul template flushes the TLB before the timed call; the conv template fences.
    sync = "gemmini_flush(0);" if kind == "mm" else "gemmini_fence();"
    offset, pad = line_offset, 64 if line_offset else 0
    return _HEAD + (_DOSA_MATMUL if kind == "mm" else "") + COLD_START + f"""
static elem_t buffer_x[{sizes[0] + pad}] __attribute__((aligned(64)));
static elem_t buffer_y[{sizes[1] + pad}] __attribute__((aligned(64)));
static elem_t buffer_z[{sizes[2] + pad}] __attribute__((aligned(64)));
#define X ((elem_t *)buffer_x + {offset})
#define Y ((elem_t *)buffer_y + {offset})
#define Z ((elem_t *)buffer_z + {offset})
AUTOCOMP_HARNESS_FN int main(void) {{
  start_cold();
  gemmini_flush(0);
{warm}  {sync}
  AUTOCOMP_MEASURE_BEGIN();
{_call(*shape)}  AUTOCOMP_MEASURE_END();
{_mapped_region(kind, mapped)}  return buffer_z[{k + 1}] == 0 ? 0 : 2;  /* zero operands, zero result */
}}
"""


def _mapped_region(kind: str, mapped: str | None) -> str:
    if mapped is None:
        return ""
    flush = "  gemmini_flush(0);\n" if kind == "mm" else ""
    return f"{flush}  AUTOCOMP_MEASURE_BEGIN();\n{mapped}  gemmini_fence();\n  AUTOCOMP_MEASURE_END();\n"


def programs(layer: tuple) -> list[str]:
    """One program per run of every binary that holds the layer, for each history it had there
    (usually one), each with that binary's buffer offset (LINE_OFFSET). Runs whose binaries put
    the buffers alike give the same program: simulate each distinct one once, but keep every
    copy for combine(), since the published median counts every run."""
    shape = tuple(layer[:7])
    return [program(*shape, history=history, line_offset=LINE_OFFSET[binary][run])
            for binary, order in BINARIES.items() if shape in order
            for history in histories(shape, binary) for run in RUNS]


def combine(cycles: list[int]) -> float:
    """A layer's modelled figure from its programs' cycles, one per run (see programs()): the
    published figure is the median over every run of every binary that holds the layer."""
    return round(statistics.median(cycles))


def name(kind: str, batch: int, c: int, k: int, p: int, r: int, stride: int) -> str:
    if kind == "mm":
        return f"matmul {p}x{c}x{k}"
    return f"conv {p}x{p} {c}->{k} {r}x{r}/{stride}"


def summary(ratios: list[float]) -> tuple[float, float, int]:
    """Geometric mean of model / FireSim, its geometric spread (exp of the RMS log ratio) and
    how many lie within +-15%."""
    logs = [math.log(x) for x in ratios]
    mean = geomean(ratios)
    spread = math.exp(math.sqrt(sum(v * v for v in logs) / len(logs)))
    return mean, spread, sum(1 for x in ratios if abs(x - 1) <= 0.15)
