// benanza harness: cublasLtMatmul's descriptors and heuristic list for one GEMM job (bz::GemmDims in
// the model's row-major terms), shared by the cuBLASLt benchmark (templates/cublaslt_matmul.cu.j2)
// and `benanza replay`'s cuBLASLt steps (replay.h), so both make the same call.
#pragma once

#include <cublasLt.h>

#include "benanza/cublas_util.h"
#include "benanza/cublaslt_names.h"

namespace bz {

constexpr int kHeuristicResults = 32;

// RAII for the cuBLASLt handle and descriptors.
struct LtHandle {
  cublasLtHandle_t h = nullptr;
  LtHandle() { BZ_CHECK_CUBLAS(cublasLtCreate(&h)); }
  ~LtHandle() { cublasLtDestroy(h); }
};
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
    BZ_CHECK_CUBLAS(cublasLtMatmulDescCreate(&d, compute, scale));
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(d); }
  template <class T>
  void set(cublasLtMatmulDescAttributes_t attr, const T& v) {
    BZ_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v));
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  // rows x cols column-major with leading dimension ld; `batch` matrices `stride` elements apart
  Layout(cudaDataType_t type, long long rows, long long cols, long long ld, int batch, long long stride) {
    BZ_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld));
    if (batch > 1) {
      BZ_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
      BZ_CHECK_CUBLAS(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(l); }
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  explicit Preference(uint64_t workspace) {
    BZ_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&p));
    BZ_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                         sizeof workspace));
  }
  ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
};

// The descriptors of one job (cuBLAS's A is the model's B, its B the model's A; C and D the output's
// shape) and the algorithms cublasLtMatmulAlgoGetHeuristic returns with `workspace` bytes offered.
struct LtMatmul {
  LtHandle lt;
  MatmulDesc op;
  Layout a, b, c, d;
  cublasLtMatmulHeuristicResult_t results[kHeuristicResults] = {};
  int returned = 0;

  LtMatmul(const GemmDims& dims, const CublasPrecision& p, cublasOperation_t op_a, cublasOperation_t op_b,
           cublasLtEpilogue_t epilogue, const void* bias, size_t workspace)
      : op(p.compute, CUDA_R_32F),
        a(p.data, op_a == CUBLAS_OP_N ? dims.cm : dims.ck, op_a == CUBLAS_OP_N ? dims.ck : dims.cm, dims.lda,
          dims.batch, dims.stride_b),
        b(p.data, op_b == CUBLAS_OP_N ? dims.ck : dims.cn, op_b == CUBLAS_OP_N ? dims.cn : dims.ck, dims.ldb,
          dims.batch, dims.stride_a),
        c(p.data, dims.cm, dims.cn, dims.ldc, dims.batch, (long long)dims.cm * dims.cn),
        d(p.data, dims.cm, dims.cn, dims.ldc, dims.batch, (long long)dims.cm * dims.cn) {
    op.set(CUBLASLT_MATMUL_DESC_TRANSA, op_a);
    op.set(CUBLASLT_MATMUL_DESC_TRANSB, op_b);
    op.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    if (bias) op.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    Preference pref(workspace);
    BZ_CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt.h, op.d, a.l, b.l, c.l, d.l, pref.p, kHeuristicResults,
                                                   results, &returned));
    if (returned <= 0) throw Error(Status::NotSupported, "cublasLtMatmulAlgoGetHeuristic returned no algorithm");
  }
};

}  // namespace bz
