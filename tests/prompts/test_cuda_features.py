"""The CUDA prompts against our compile tier: every feature the menu and description offer
compiles with nvcc for the architecture it is offered for and passes the static checks;
wgmma is offered only for sm_90a (ptxas refuses it for sm_90); what the description says is
unavailable (TMA tensor maps through the driver API) is refused."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from autocomp.backends.cuda import static_checks
from autocomp.backends.cuda.compile import Compiler, find_nvcc
from autocomp.prompts import load_pieces, pieces_for_problem

requires_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (CUDA toolkit) is not installed; .ci/install-cuda.sh says how")

# feature -> (words that name it in a menu option, architecture, kernel source)
PROBES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "vector loads and read-only path": (("float4", "__ldg", "const __restrict__"), "sm_90", r'''
__global__ void k(const float4* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float4 v = x[i]; y[i] = v.x + v.y + v.z + v.w + __ldg(&x[0].x); }
}'''),
    "shared memory tiles, padding, unroll": (("shared memory", "#pragma unroll", "[TILE][TILE+1]", "__launch_bounds__"), "sm_90", r'''
#define TILE 32
__global__ void __launch_bounds__(256) k(const float* __restrict__ x, float* y, int n) {
  __shared__ float t[TILE][TILE + 1];
  int r = threadIdx.y, c = threadIdx.x;
  t[r][c] = x[(blockIdx.x * TILE + r) * TILE + c];
  __syncthreads();
  float s = 0.f;
  #pragma unroll
  for (int j = 0; j < TILE; j++) s = fmaf(t[c][j], 2.0f, s);
  y[blockIdx.x * TILE * TILE + r * TILE + c] = s + __expf(0.f) + rsqrtf(1.f);
}'''),
    "cp.async pipeline": (("cp.async", "cp.async.ca.shared.global"), "sm_80", r'''
__global__ void k(const float* x, float* y) {
  __shared__ alignas(16) float buf[2][128];
  unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(&buf[0][threadIdx.x]));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(d), "l"(&x[threadIdx.x]));
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();
  y[threadIdx.x] = buf[0][threadIdx.x];
}'''),
    "cuda_pipeline.h primitives": (("__pipeline_memcpy_async", "__pipeline_commit", "__pipeline_wait_prior"), "sm_80", r'''
#include <cuda_pipeline.h>
__global__ void k(const float4* x, float4* y) {
  __shared__ float4 buf[2][128];
  __pipeline_memcpy_async(&buf[0][threadIdx.x], &x[threadIdx.x], sizeof(float4));
  __pipeline_commit();
  __pipeline_memcpy_async(&buf[1][threadIdx.x], &x[128 + threadIdx.x], sizeof(float4));
  __pipeline_commit();
  __pipeline_wait_prior(1);
  float4 a = buf[0][threadIdx.x];
  __pipeline_wait_prior(0);
  float4 b = buf[1][threadIdx.x];
  y[threadIdx.x] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}'''),
    "cuda::memcpy_async with a barrier": (("memcpy_async",), "sm_80", r'''
#include <cuda/barrier>
#include <cooperative_groups.h>
__global__ void k(const float* x, float* y) {
  __shared__ float buf[256];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cooperative_groups::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  cuda::memcpy_async(block, buf, x, sizeof(float) * 256, bar);
  bar.arrive_and_wait();
  y[threadIdx.x] = buf[threadIdx.x];
}'''),
    "warp shuffles and reductions": (("__shfl_xor_sync", "__shfl_down_sync", "warp shuffles", "atomicAdd"), "sm_90", r'''
__global__ void k(const float* x, float* y, const int* xi, int* yi) {
  float v = x[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  v += __shfl_down_sync(0xffffffff, v, 1);
  int s = __reduce_add_sync(0xffffffff, xi[threadIdx.x]);
  if (threadIdx.x == 0) { atomicAdd(y, v); yi[0] = s; }
}'''),
    "wmma tensor cores": (("nvcuda::wmma",), "sm_80", r'''
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
__global__ void k(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}'''),
    "mma.sync PTX": (("mma.sync",), "sm_80", r'''
__global__ void k(const unsigned* a, const unsigned* b, float* c) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  unsigned a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], b0 = b[0], b1 = b[1];
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  c[threadIdx.x] = d0 + d1 + d2 + d3;
}'''),
    "dynamic shared memory above 48 KB": (("cudaFuncSetAttribute", "dynamic shared memory"), "sm_90", r'''
__global__ void k(float* y) { extern __shared__ float s[]; s[threadIdx.x] = 1.f; __syncthreads(); y[threadIdx.x] = s[threadIdx.x]; }
void entry(float* y) {
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024);
  k<<<1, 128, 100 * 1024>>>(y);
}'''),
    "templates for problem sizes": (("template", "constexpr"), "sm_90", r'''
template <int N> __global__ void k(float* y) { constexpr int n = N; y[threadIdx.x % n] = n; }
void entry(float* y) { k<128><<<1, 128>>>(y); }'''),
    "1-D bulk async copies (sm_90)": (("cp.async.bulk",), "sm_90", r'''
#include <cuda/barrier>
#include <cuda/std/cstdint>
__global__ void k(const float* x, float* y) {
  __shared__ alignas(128) float buf[1024];
  __shared__ alignas(8) unsigned long long bar;
  unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(buf));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(4096));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(d), "l"(x), "r"(4096), "r"(b) : "memory");
  }
  __syncthreads();
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(b));
  y[threadIdx.x] = buf[threadIdx.x];
}'''),
    "thread block clusters (sm_90)": (("__cluster_dims__", "distributed shared memory"), "sm_90", r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void __cluster_dims__(2, 1, 1) k(float* y) {
  __shared__ float s[32];
  cg::cluster_group cluster = cg::this_cluster();
  s[threadIdx.x] = threadIdx.x;
  cluster.sync();
  float* other = cluster.map_shared_rank(s, (cluster.block_rank() + 1) % 2);
  y[blockIdx.x * 32 + threadIdx.x] = other[threadIdx.x];
  cluster.sync();
}'''),
    "wgmma (sm_90a)": (("wgmma",), "sm_90a", r'''
__global__ void k(float* y) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
  y[threadIdx.x] = 1.f;
}'''),
}


def _compile(source: str, arch: str, tmp_path: Path):
    compiler = Compiler(find_nvcc(), arch, cache_dir=tmp_path / "cache")
    return asyncio.run(compiler.compile(source, use_cache=False))


def _menu(arch: str) -> list[str]:
    return list(pieces_for_problem(load_pieces("cuda"), "k.cu", {"file": "", "arch": arch}).menu)


def test_every_named_feature_of_the_menu_has_a_probe():
    """Menu options that name a specific API or instruction are covered by a probe."""
    words = [w for ws, _, _ in PROBES.values() for w in ws]
    named = ("wgmma", "cp.async", "wmma", "mma.sync", "__shfl", "float4", "__ldg", "__cluster_dims__", "cudaFuncSetAttribute",
             "#pragma unroll", "template", "atomicAdd", "memcpy_async", "__pipeline_memcpy_async",
             "__pipeline_commit", "__pipeline_wait_prior")
    for arch in ("sm_80", "sm_90", "sm_90a"):
        for option in _menu(arch):
            for n in named:
                if n in option:
                    assert any(n in w for w in words), f"no probe for {n!r} ({option})"


@requires_nvcc
@pytest.mark.parametrize("feature", sorted(PROBES))
def test_feature_compiles_for_its_architecture_and_passes_static_checks(feature, tmp_path):
    _, arch, source = PROBES[feature]
    findings = static_checks.check_cuda(source)
    assert findings == [], [f.render() for f in findings]
    result = _compile(source, arch, tmp_path)
    assert result.ok, result.log[-2000:]


@requires_nvcc
def test_wgmma_is_refused_for_sm_90_and_offered_only_for_sm_90a(tmp_path):
    source = PROBES["wgmma (sm_90a)"][2].replace("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)", "#if 1")
    result = _compile(source, "sm_90", tmp_path)
    assert not result.ok and "wgmma" in result.log
    assert not any("wgmma" in o for o in _menu("sm_90")) and any("wgmma" in o for o in _menu("sm_90a"))
    assert not any("cp.async.bulk" in o or "__cluster_dims__" in o for o in _menu("sm_80"))


def test_tma_tensor_maps_are_refused_and_the_prompt_says_so():
    source = r'''
#include <cuda.h>
__global__ void k(float* y) { y[0] = 1.f; }
void entry(float* y, void* map) {
  cuTensorMapEncodeTiled((CUtensorMap*)map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, y, 0, 0, 0, 0,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  void* fn; cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q);
  k<<<1, 1>>>(y);
}'''
    assert {f.rule for f in static_checks.check_cuda(source)} & {"library-fallback"}
    description = pieces_for_problem(load_pieces("cuda"), "k.cu", {"file": "", "arch": "sm_90"}).description
    assert "nvcc -arch=sm_90" in description and "tensor maps" in description.lower()
    assert not any("TMA" in o and "not available" not in o for o in _menu("sm_90"))


def test_split_k_and_atomics_state_the_tolerance():
    pieces = load_pieces("cuda")
    for option in pieces.menu:
        if "split-K" in option or "atomicAdd" in option:
            assert "1e-4" in option, option
    assert "|out - ref| <= tol + tol * |ref|" in pieces.description
