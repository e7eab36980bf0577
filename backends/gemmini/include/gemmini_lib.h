/* Autocomp's Gemmini software library: tiled_matmul_auto and tiled_conv_auto.
 *
 * Included by gemmini.h. These are the "software library" baselines that hand-written and
 * LLM-optimized kernels are compared with: a reasonable, general tiling (loop_ws per tile,
 * tiles sized to half the scratchpad and half the accumulator so two loops can overlap),
 * not a tuned schedule. The convolution lowers to a GEMM over an im2col buffer built by the
 * host core.
 */
#ifndef AUTOCOMP_GEMMINI_LIB_H
#define AUTOCOMP_GEMMINI_LIB_H

/* Library routines are static (header-only) and may go unused in a program. */
#define GEMMINI_LIB_FN static __attribute__((unused))

/* CPU reference: C = act(scale(A*B + D)), the semantics the accelerator paths implement. */
GEMMINI_LIB_FN void gemmini_matmul_cpu(size_t dim_I, size_t dim_J, size_t dim_K,
                               const elem_t *A, const elem_t *B, const void *D, void *C,
                               size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C,
                               scale_t A_scale_factor, scale_t B_scale_factor, int act,
                               acc_scale_t scale, bool repeating_bias, bool transpose_A,
                               bool transpose_B, bool full_C, bool low_D) {
  for (size_t i = 0; i < dim_I; i++) {
    for (size_t j = 0; j < dim_J; j++) {
      acc_t sum = 0;
      if (D != NULL) {
        size_t row = repeating_bias ? 0 : i;
        sum = low_D ? (acc_t)((const elem_t *)D)[row * stride_D + j] : ((const acc_t *)D)[row * stride_D + j];
      }
      for (size_t k = 0; k < dim_K; k++) {
        elem_t a = transpose_A ? A[k * stride_A + i] : A[i * stride_A + k];
        elem_t b = transpose_B ? B[j * stride_B + k] : B[k * stride_B + j];
        sum = (acc_t)((uint32_t)sum + (uint32_t)((acc_t)MVIN_SCALE(a, A_scale_factor) * (acc_t)MVIN_SCALE(b, B_scale_factor)));
      }
      if (full_C) {
        ((acc_t *)C)[i * stride_C + j] = sum;
      } else {
        elem_t v = (elem_t)ACC_SCALE(sum, scale);
        if (act == RELU && v < 0) v = 0;
        ((elem_t *)C)[i * stride_C + j] = v;
      }
    }
  }
}

/* Tile sizes (in DIM blocks) for loop_ws: C tile within half the accumulator, A and B tiles
 * within half the scratchpad, grown from 4x4 while they fit. */
GEMMINI_LIB_FN void gemmini_choose_tiles(size_t I, size_t J, size_t K, size_t *tI, size_t *tJ, size_t *tK) {
  const size_t acc_tiles = (ACC_ROWS / 2) / DIM;
  const size_t sp_tiles = (BANK_NUM * BANK_ROWS / 2) / DIM;
  size_t ti = I < 4 ? I : 4, tj = J < 4 ? J : 4;
  size_t tk = sp_tiles / (ti + tj);
  if (tk > K) tk = K;
  for (int grew = 1; grew;) {
    grew = 0;
    if (tj < J && ti * (tj + 1) <= acc_tiles && (ti + tj + 1) * tk <= sp_tiles) { tj++; grew = 1; }
    if (ti < I && (ti + 1) * tj <= acc_tiles && (ti + 1 + tj) * tk <= sp_tiles) { ti++; grew = 1; }
  }
  *tI = ti; *tJ = tj; *tK = tk;
}

GEMMINI_LIB_FN void gemmini_tiled_matmul_os(size_t dim_I, size_t dim_J, size_t dim_K,
                                    const elem_t *A, const elem_t *B, const void *D, void *C,
                                    size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C,
                                    scale_t A_scale_factor, scale_t B_scale_factor, int act,
                                    acc_scale_t scale, bool repeating_bias, bool full_C, bool low_D) {
  /* Output-stationary: one DIM x DIM output tile at a time, K streamed through the mesh,
   * bias in the accumulator, result read back through the accumulator's scaling path. */
  const size_t sizeof_C = full_C ? sizeof(acc_t) : sizeof(elem_t);
  const size_t sizeof_D = low_D ? sizeof(elem_t) : sizeof(acc_t);
  gemmini_extended_config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(stride_C * sizeof_C, act, scale);
  gemmini_extended3_config_ld(stride_A * sizeof(elem_t), A_scale_factor, false, 0);
  gemmini_extended3_config_ld(stride_B * sizeof(elem_t), B_scale_factor, false, 1);
  gemmini_extended3_config_ld(repeating_bias ? 0 : stride_D * sizeof_D, MVIN_SCALE_IDENTITY, low_D, 2);
  const uint32_t a_sp = 0, b_sp = BANK_ROWS * 2, c_acc = 1u << 31;
  for (size_t i = 0; i < dim_I; i += DIM) {
    const size_t rows = dim_I - i < DIM ? dim_I - i : DIM;
    for (size_t j = 0; j < dim_J; j += DIM) {
      const size_t cols = dim_J - j < DIM ? dim_J - j : DIM;
      bool have_bias = D != NULL;
      if (have_bias) {
        const char *d = (const char *)D + ((repeating_bias ? 0 : i) * stride_D + j) * sizeof_D;
        gemmini_extended_mvin3(d, c_acc, cols, rows);
      }
      for (size_t k = 0; k < dim_K; k += DIM) {
        const size_t ks = dim_K - k < DIM ? dim_K - k : DIM;
        gemmini_extended_mvin(A + i * stride_A + k, a_sp, ks, rows);
        gemmini_extended_mvin2(B + k * stride_B + j, b_sp, cols, ks);
        const bool last = k + DIM >= dim_K;
        uint32_t out = last ? (c_acc | (have_bias ? (1u << 30) : 0)) : GARBAGE_ADDR;
        gemmini_extended_preload(GARBAGE_ADDR, out, DIM, DIM, cols, rows);
        if (k == 0) gemmini_extended_compute_preloaded(a_sp, b_sp, ks, rows, cols, ks);
        else gemmini_extended_compute_accumulated(a_sp, b_sp, ks, rows, cols, ks);
      }
      gemmini_extended_mvout((char *)C + (i * stride_C + j) * sizeof_C, c_acc | (full_C ? (1u << 29) : 0), cols, rows);
    }
  }
  gemmini_fence();
}

GEMMINI_LIB_FN void tiled_matmul_auto(size_t dim_I, size_t dim_J, size_t dim_K,
                              const elem_t *A, const elem_t *B, const void *D, void *C,
                              size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C,
                              scale_t A_scale_factor, scale_t B_scale_factor, scale_acc_t D_scale_factor,
                              int act, acc_scale_t scale, acc_scale_t bert_scale, bool repeating_bias,
                              bool transpose_A, bool transpose_B, bool full_C, bool low_D,
                              uint8_t weightA, enum tiled_matmul_type_t tiled_matmul_type) {
  (void)D_scale_factor; (void)bert_scale; (void)weightA;
  if (act != NO_ACTIVATION && act != RELU) {
    printf("tiled_matmul_auto: activation %d is not supported (NO_ACTIVATION or RELU)\n", act);
    exit(2);
  }
  if (tiled_matmul_type == CPU) {
    gemmini_matmul_cpu(dim_I, dim_J, dim_K, A, B, D, C, stride_A, stride_B, stride_D, stride_C,
                       A_scale_factor, B_scale_factor, act, scale, repeating_bias, transpose_A,
                       transpose_B, full_C, low_D);
    return;
  }
  if (tiled_matmul_type == OS) {
    if (transpose_A || transpose_B) {
      printf("tiled_matmul_auto: transposes need the WS dataflow\n");
      exit(2);
    }
    gemmini_tiled_matmul_os(dim_I, dim_J, dim_K, A, B, D, C, stride_A, stride_B, stride_D, stride_C,
                            A_scale_factor, B_scale_factor, act, scale, repeating_bias, full_C, low_D);
    return;
  }
  const size_t I = (dim_I + DIM - 1) / DIM, J = (dim_J + DIM - 1) / DIM, K = (dim_K + DIM - 1) / DIM;
  const size_t pad_I = I * DIM - dim_I, pad_J = J * DIM - dim_J, pad_K = K * DIM - dim_K;
  const size_t sizeof_C = full_C ? sizeof(acc_t) : sizeof(elem_t);
  const size_t sizeof_D = low_D ? sizeof(elem_t) : sizeof(acc_t);
  size_t tI, tJ, tK;
  gemmini_choose_tiles(I, J, K, &tI, &tJ, &tK);

  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, transpose_A, transpose_B);
  gemmini_extended_config_st(stride_C * sizeof_C, act, scale);
  gemmini_extended3_config_ld(stride_A * sizeof(elem_t), A_scale_factor, false, 0);
  gemmini_extended3_config_ld(stride_B * sizeof(elem_t), B_scale_factor, false, 1);
  gemmini_extended3_config_ld(repeating_bias ? 0 : stride_D * sizeof_D, MVIN_SCALE_IDENTITY, low_D, 2);

  for (size_t i0 = 0; i0 < I; i0 += tI) {
    const size_t ni = I - i0 < tI ? I - i0 : tI;
    for (size_t j0 = 0; j0 < J; j0 += tJ) {
      const size_t nj = J - j0 < tJ ? J - j0 : tJ;
      for (size_t k0 = 0; k0 < K; k0 += tK) {
        const size_t nk = K - k0 < tK ? K - k0 : tK;
        const bool last_k = k0 + nk >= K;
        const elem_t *a = transpose_A ? A + k0 * DIM * stride_A + i0 * DIM : A + i0 * DIM * stride_A + k0 * DIM;
        const elem_t *b = transpose_B ? B + j0 * DIM * stride_B + k0 * DIM : B + k0 * DIM * stride_B + j0 * DIM;
        const void *d = NULL;
        if (D != NULL && k0 == 0)
          d = (const char *)D + ((repeating_bias ? 0 : i0 * DIM) * stride_D + j0 * DIM) * sizeof_D;
        void *c = last_k ? (char *)C + (i0 * DIM * stride_C + j0 * DIM) * sizeof_C : NULL;
        gemmini_loop_ws(ni, nj, nk,
                        i0 + ni >= I ? pad_I : 0, j0 + nj >= J ? pad_J : 0, last_k ? pad_K : 0,
                        a, b, d, c, stride_A, stride_B, repeating_bias ? 0 : stride_D, stride_C,
                        transpose_A, transpose_B, full_C, low_D, (d != NULL) || k0 > 0, act, 0, 0, false);
      }
    }
  }
  gemmini_fence();
}

/* Explicit tile sizes (in DIM blocks), as in the Gemmini library's tiled_matmul. */
GEMMINI_LIB_FN void tiled_matmul(size_t dim_I, size_t dim_J, size_t dim_K,
                         const elem_t *A, const elem_t *B, const void *D, void *C,
                         size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C,
                         scale_t A_scale_factor, scale_t B_scale_factor, scale_acc_t D_scale_factor,
                         int act, acc_scale_t scale, acc_scale_t bert_scale, bool repeating_bias,
                         size_t tile_I, size_t tile_J, size_t tile_K,
                         bool transpose_A, bool transpose_B, bool full_C, bool low_D,
                         uint8_t weightA, enum tiled_matmul_type_t tiled_matmul_type) {
  (void)tile_I; (void)tile_J; (void)tile_K;
  tiled_matmul_auto(dim_I, dim_J, dim_K, A, B, D, C, stride_A, stride_B, stride_D, stride_C,
                    A_scale_factor, B_scale_factor, D_scale_factor, act, scale, bert_scale,
                    repeating_bias, transpose_A, transpose_B, full_C, low_D, weightA, tiled_matmul_type);
}

/* Convolution lowered to a GEMM over an im2col buffer that the host fills.
 * Layouts (as in the Gemmini library): input NHWC [batch][rows][cols][in_channels], or CHWN
 * with trans_input_3120; weights HWIO [kernel_dim][kernel_dim][in_channels][out_channels],
 * or WIHO-style [in_channels][kernel_dim][kernel_dim][out_channels] with trans_weight_1203,
 * or HWOI [kernel_dim][kernel_dim][out_channels][in_channels] with trans_weight_0132; bias
 * [out_channels] (may be NULL); output NHWC, or HWNC with trans_output_1203; optional max
 * pooling of the activated int8 output (padding counts as 0). */
GEMMINI_LIB_FN void tiled_conv_stride_auto(int batch_size, int in_row_dim, int in_col_dim, int in_channels,
                                   int out_channels, int out_row_dim, int out_col_dim,
                                   int stride, int input_dilation, int kernel_dilation, int padding, int kernel_dim,
                                   int in_stride, int weight_stride, int out_stride,
                                   bool wrot180, bool trans_output_1203, bool trans_input_3120,
                                   bool trans_weight_1203, bool trans_weight_0132,
                                   const elem_t *input, const elem_t *weights, const acc_t *bias, elem_t *output,
                                   int act, acc_scale_t scale, int pool_size, int pool_stride, int pool_padding,
                                   enum tiled_matmul_type_t tiled_conv_type) {
  if (input_dilation < 1) input_dilation = 1;
  if (kernel_dilation < 1) kernel_dilation = 1;
  const size_t rows = (size_t)batch_size * out_row_dim * out_col_dim;
  const size_t patch = (size_t)kernel_dim * kernel_dim * in_channels;
  const bool pooling = pool_size > 1 || pool_stride > 1;
  const bool direct_out = !pooling && !trans_output_1203;
  if (trans_weight_1203 || trans_weight_0132) weight_stride = out_channels;
  elem_t *cols = (elem_t *)malloc(rows * patch);
  elem_t *conv_out = direct_out ? output : (elem_t *)malloc(rows * (size_t)out_channels);
  elem_t *w = (elem_t *)weights;
  if (trans_weight_1203 || trans_weight_0132) w = (elem_t *)malloc(patch * (size_t)out_channels);
  if (cols == NULL || conv_out == NULL || w == NULL) {
    printf("tiled_conv_auto: out of memory for a %u x %u im2col buffer\n", (unsigned)rows, (unsigned)patch);
    exit(2);
  }
  if (w != weights) {
    const size_t kk = (size_t)kernel_dim * kernel_dim;
    for (size_t kr = 0; kr < (size_t)kernel_dim; kr++)
      for (size_t kc = 0; kc < (size_t)kernel_dim; kc++)
        for (size_t c = 0; c < (size_t)in_channels; c++)
          for (size_t o = 0; o < (size_t)out_channels; o++) {
            size_t src = trans_weight_1203 ? (c * kk + kr * kernel_dim + kc) * out_channels + o
                                           : ((kr * kernel_dim + kc) * out_channels + o) * in_channels + c;
            w[((kr * kernel_dim + kc) * in_channels + c) * out_channels + o] = weights[src];
          }
  }
  size_t r = 0;
  for (int b = 0; b < batch_size; b++)
    for (int orow = 0; orow < out_row_dim; orow++)
      for (int ocol = 0; ocol < out_col_dim; ocol++, r++) {
        elem_t *dst = cols + r * patch;
        for (int kr = 0; kr < kernel_dim; kr++)
          for (int kc = 0; kc < kernel_dim; kc++) {
            const int krow = wrot180 ? kernel_dim - 1 - kr : kr;
            const int kcol = wrot180 ? kernel_dim - 1 - kc : kc;
            const int irow_d = orow * stride + krow * kernel_dilation - padding;
            const int icol_d = ocol * stride + kcol * kernel_dilation - padding;
            elem_t *d = dst + ((size_t)kr * kernel_dim + kc) * in_channels;
            const int irow = irow_d / input_dilation, icol = icol_d / input_dilation;
            if (irow_d < 0 || icol_d < 0 || irow_d % input_dilation || icol_d % input_dilation ||
                irow >= in_row_dim || icol >= in_col_dim) {
              memset(d, 0, (size_t)in_channels);
            } else if (trans_input_3120) {
              for (int c = 0; c < in_channels; c++)
                d[c] = input[(((size_t)c * in_row_dim + irow) * in_col_dim + icol) * batch_size + b];
            } else {
              memcpy(d, input + (((size_t)b * in_row_dim + irow) * in_col_dim + icol) * in_stride, (size_t)in_channels);
            }
          }
      }
  tiled_matmul_auto(rows, (size_t)out_channels, patch, cols, w, bias, conv_out,
                    patch, (size_t)weight_stride, 0, direct_out ? (size_t)out_stride : (size_t)out_channels,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, 1, act, scale, 0, true,
                    false, false, false, false, 3, tiled_conv_type);
  if (!direct_out) {
    int prows = out_row_dim, pcols = out_col_dim, psize = 1, pstride = 1, ppad = 0;
    if (pooling) {
      psize = pool_size < 1 ? 1 : pool_size;
      pstride = pool_stride < 1 ? 1 : pool_stride;
      ppad = pool_padding;
      prows = (out_row_dim + 2 * ppad - psize) / pstride + 1;
      pcols = (out_col_dim + 2 * ppad - psize) / pstride + 1;
    }
    for (int b = 0; b < batch_size; b++)
      for (int pr = 0; pr < prows; pr++)
        for (int pc = 0; pc < pcols; pc++)
          for (int ch = 0; ch < out_channels; ch++) {
            elem_t best = elem_t_min;
            for (int wr = 0; wr < psize; wr++)
              for (int wc = 0; wc < psize; wc++) {
                const int orow = pr * pstride + wr - ppad;
                const int ocol = pc * pstride + wc - ppad;
                elem_t v = 0;
                if (orow >= 0 && ocol >= 0 && orow < out_row_dim && ocol < out_col_dim)
                  v = conv_out[(((size_t)b * out_row_dim + orow) * out_col_dim + ocol) * out_channels + ch];
                if (v > best) best = v;
              }
            size_t at = trans_output_1203 ? (((size_t)pr * pcols + pc) * batch_size + b) * out_channels + ch
                                          : (((size_t)b * prows + pr) * pcols + pc) * out_stride + ch;
            output[at] = best;
          }
    free(conv_out);
  }
  if (w != weights) free(w);
  free(cols);
}

GEMMINI_LIB_FN void tiled_conv_auto(int batch_size, int in_row_dim, int in_col_dim, int in_channels,
                            int out_channels, int out_row_dim, int out_col_dim,
                            int stride, int input_dilation, int kernel_dilation, int padding, int kernel_dim,
                            bool wrot180, bool trans_output_1203, bool trans_input_3120,
                            bool trans_weight_1203, bool trans_weight_0132,
                            const elem_t *input, const elem_t *weights, const acc_t *bias, elem_t *output,
                            int act, acc_scale_t scale, int pool_size, int pool_stride, int pool_padding,
                            enum tiled_matmul_type_t tiled_conv_type) {
  tiled_conv_stride_auto(batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim, out_col_dim,
                         stride, input_dilation, kernel_dilation, padding, kernel_dim,
                         in_channels, out_channels, out_channels,
                         wrot180, trans_output_1203, trans_input_3120, trans_weight_1203, trans_weight_0132,
                         input, weights, bias, output, act, scale, pool_size, pool_stride, pool_padding,
                         tiled_conv_type);
}

/* C = act(C_scale * (MVIN_SCALE(A, A_scale) + MVIN_SCALE(B, B_scale))), elementwise, through
 * loop_ws's residual-add mode in tiles that fit half the accumulator. */
GEMMINI_LIB_FN void tiled_resadd_stride_auto(size_t I, size_t J, scale_t A_scale, scale_t B_scale, acc_scale_t C_scale,
                                     size_t stride, const elem_t *A, const elem_t *B, elem_t *C, bool relu,
                                     enum tiled_matmul_type_t matadd_type) {
  if (matadd_type == CPU) {
    for (size_t i = 0; i < I; i++)
      for (size_t j = 0; j < J; j++) {
        acc_t s = (acc_t)MVIN_SCALE(A[i * stride + j], A_scale) + (acc_t)MVIN_SCALE(B[i * stride + j], B_scale);
        elem_t v = (elem_t)ACC_SCALE(s, C_scale);
        C[i * stride + j] = relu && v < 0 ? 0 : v;
      }
    return;
  }
  gemmini_extended_config_st(stride, relu ? RELU : NO_ACTIVATION, C_scale);
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended4_config_ld(stride, A_scale, true, DIM, 0);
  gemmini_extended4_config_ld(stride, B_scale, true, DIM, 1);
  const size_t tI_max = 4, tJ_max = (ACC_ROWS / 2) / DIM / tI_max; /* tiles of DIM x DIM */
  for (size_t i = 0; i < I; i += tI_max * DIM)
    for (size_t j = 0; j < J; j += tJ_max * DIM) {
      const size_t rows = I - i < tI_max * DIM ? I - i : tI_max * DIM;
      const size_t cols = J - j < tJ_max * DIM ? J - j : tJ_max * DIM;
      const size_t ti = (rows + DIM - 1) / DIM, tj = (cols + DIM - 1) / DIM;
      gemmini_loop_ws(ti, tj, 0, ti * DIM - rows, tj * DIM - cols, 0,
                      A + i * stride + j, B + i * stride + j, NULL, C + i * stride + j,
                      stride, stride, 0, stride, false, false, false, false, false, relu ? RELU : NO_ACTIVATION, 0, 0, true);
    }
  gemmini_fence();
}

GEMMINI_LIB_FN void resadd_cpu(size_t I, size_t J, size_t stride, scale_t A_scale, scale_t B_scale, acc_scale_t C_scale,
                       const elem_t *A, const elem_t *B, elem_t *C, bool relu) {
  tiled_resadd_stride_auto(I, J, A_scale, B_scale, C_scale, stride, A, B, C, relu, CPU);
}

GEMMINI_LIB_FN void tiled_resadd_auto(size_t I, size_t J, scale_t A_scale, scale_t B_scale, acc_scale_t C_scale,
                              const elem_t *A, const elem_t *B, elem_t *C, bool relu,
                              enum tiled_matmul_type_t matadd_type) {
  tiled_resadd_stride_auto(I, J, A_scale, B_scale, C_scale, J, A, B, C, relu, matadd_type);
}

/* Per-channel mean over dim x dim pixels of NHWC input (output [batches][channels]): sums
 * accumulate in the accumulator through int8 move-ins, the mean comes out of the scaling
 * path (scale 1/(dim*dim), ties to even). */
GEMMINI_LIB_FN void tiled_global_average_auto(const elem_t *input, elem_t *output, int batches, int channels, int dim,
                                      enum tiled_matmul_type_t type) {
  const int count = dim * dim;
  if (type == CPU) {
    for (int b = 0; b < batches; b++)
      for (int c = 0; c < channels; c++) {
        acc_t s = 0;
        for (int p = 0; p < count; p++) s += input[((size_t)b * count + p) * channels + c];
        output[(size_t)b * channels + c] = (elem_t)ACC_SCALE(s, 1.0f / count);
      }
    return;
  }
  gemmini_extended4_config_ld(channels, MVIN_SCALE_IDENTITY, true, 1, 0);
  gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
  gemmini_extended_config_st(channels, NO_ACTIVATION, 1.0f / count);
  const int chunk = MAX_BLOCK_LEN * DIM;
  for (int b = 0; b < batches; b++)
    for (int c0 = 0; c0 < channels; c0 += (ACC_ROWS / 2) * DIM) {
      const int tile = channels - c0 < (ACC_ROWS / 2) * DIM ? channels - c0 : (ACC_ROWS / 2) * DIM;
      for (int c = 0; c < tile; c += chunk) {
        const int cols = tile - c < chunk ? tile - c : chunk;
        for (int p = 0; p < count; p++)
          gemmini_extended_mvin(input + ((size_t)b * count + p) * channels + c0 + c,
                                (1u << 31) | (p ? (1u << 30) : 0) | (uint32_t)(c / DIM), cols, 1);
      }
      for (int c = 0; c < tile; c += DIM)
        gemmini_extended_mvout(output + (size_t)b * channels + c0 + c, (1u << 31) | (uint32_t)(c / DIM),
                               tile - c < DIM ? tile - c : DIM, 1);
    }
  gemmini_fence();
}

#endif /* AUTOCOMP_GEMMINI_LIB_H */
