// benanza harness, cuDNN graph-API family: canonical engine-config names.
//
// A graph-API benchmark's algorithm is the name benanza.profile.cudnn_log.engine_config_name
// gives the same engine config when it reads it from a framework's cuDNN API log:
//
//   eng<global engine index>  then  _k<KNOB>=<value>  per knob choice, sorted by KNOB
//
// where KNOB is the cudnnBackendKnobType_t spelling without CUDNN_KNOB_TYPE_ (e.g.
// eng38_kIDX_MODE=0_kLDGC=0_kSPECFILT=0_kSTAGES=4_kTILEK=1_kTILE_SIZE=8).  cudnn-frontend's
// plan names (get_plan_name_at_index) carry the knob types as numbers (eng38_k2=8_k13=1...),
// so they are parsed here and the numbers mapped through kKnobNames, a table of the enum
// in cudnn_graph.h kept in enum order (tests/test_graph_api.py checks it against the header).
// Only <cudnn_graph.h>: this header compiles without cudnn-frontend, for that test.
#pragma once

#include <cudnn_graph.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "benanza/name_parts.h"  // generated from benanza/apis/names.py: the name's pieces

namespace bz {

// cudnnBackendKnobType_t (cuDNN 9.19), index = enum value, without the CUDNN_KNOB_TYPE_ prefix.
inline constexpr const char* kKnobNames[] = {
    "SPLIT_K",                // 0 (deprecated)
    "SWIZZLE",                // 1
    "TILE_SIZE",              // 2
    "USE_TEX",                // 3 (deprecated)
    "EDGE",                   // 4
    "KBLOCK",                 // 5 (deprecated)
    "LDGA",                   // 6 (deprecated)
    "LDGB",                   // 7 (deprecated)
    "CHUNK_K",                // 8 (deprecated)
    "SPLIT_H",                // 9 (deprecated)
    "WINO_TILE",              // 10 (deprecated)
    "MULTIPLY",               // 11
    "SPLIT_K_BUF",            // 12
    "TILEK",                  // 13
    "STAGES",                 // 14
    "REDUCTION_MODE",         // 15
    "CTA_SPLIT_K_MODE",       // 16 (deprecated)
    "SPLIT_K_SLC",            // 17
    "IDX_MODE",               // 18
    "SLICED",                 // 19 (deprecated)
    "SPLIT_RS",               // 20 (deprecated)
    "SINGLEBUFFER",           // 21 (deprecated)
    "LDGC",                   // 22 (deprecated)
    "SPECFILT",               // 23
    "KERNEL_CFG",             // 24
    "WORKSPACE",              // 25
    "TILE_CGA",               // 26 (deprecated)
    "TILE_CGA_M",             // 27
    "TILE_CGA_N",             // 28
    "BLOCK_SIZE",             // 29
    "OCCUPANCY",              // 30
    "ARRAY_SIZE_PER_THREAD",  // 31
    "NUM_C_PER_BLOCK",        // 32 (deprecated)
    "SPLIT_COLS",             // 33
    "TILE_ROWS",              // 34
    "TILE_COLS",              // 35
    "LOAD_SIZE",              // 36
    "CTA_COUNT",              // 37
    "STREAM_K",               // 38
    "SPLIT_P_SLC",            // 39
    "TILE_M",                 // 40
    "TILE_N",                 // 41
    "WARP_SPEC_CFG",          // 42
    "SWAP_AB",                // 43
};

// cudnnBackendNumericalNote_t / cudnnBackendBehaviorNote_t, without their CUDNN_*_NOTE_ prefix.
inline constexpr const char* kNumericalNoteNames[] = {
    "TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION", "FFT", "NONDETERMINISTIC",
    "WINOGRAD",    "WINOGRAD_TILE_4x4",   "WINOGRAD_TILE_6x6",           "WINOGRAD_TILE_13x13", "STRICT_NAN_PROP",
};
inline constexpr const char* kBehaviorNoteNames[] = {
    "RUNTIME_COMPILATION", "REQUIRES_FILTER_INT8x32_REORDER", "REQUIRES_BIAS_INT8x32_REORDER",
    "SUPPORTS_CUDA_GRAPH_NATIVE_API", "CUBLASLT_DEPENDENCY",
};

#if CUDNN_VERSION >= 91900 && CUDNN_VERSION < 92000
// The tables are of cuDNN 9.19; another version may have added values (named KNOB<n> then).
static_assert(std::size(kKnobNames) == CUDNN_KNOB_TYPE_COUNTS, "kKnobNames is out of step with cudnn_graph.h");
static_assert(std::size(kNumericalNoteNames) == CUDNN_NUMERICAL_NOTE_TYPE_COUNT, "numerical notes changed");
static_assert(std::size(kBehaviorNoteNames) == CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, "behavior notes changed");
#endif

template <size_t N>
inline std::string enum_name(const char* const (&table)[N], long long value, const char* unknown) {
  if (value >= 0 && size_t(value) < N) return table[size_t(value)];
  return unknown + std::to_string(value);
}

inline std::string knob_name(long long type) { return enum_name(kKnobNames, type, "KNOB"); }

// The cudnnBackendKnobType_t of a knob name (without CUDNN_KNOB_TYPE_); -1 when unknown.
inline long long knob_type(const std::string& name) {
  for (size_t i = 0; i < std::size(kKnobNames); ++i)
    if (name == kKnobNames[i]) return (long long)i;
  return -1;
}

// One knob choice by name, and an engine config as the log reader names it.
using KnobChoice = std::pair<std::string, long long>;

inline std::string engine_config_name(long long engine_id, std::vector<KnobChoice> knobs) {
  std::sort(knobs.begin(), knobs.end());  // by name (bytewise, as Python sorts ASCII strings)
  std::string out = kEngineTag + std::to_string(engine_id);
  for (const auto& [name, value] : knobs) out += kKnobTag + name + "=" + std::to_string(value);
  return out;
}

// A cudnn-frontend plan name "eng38_k2=8_k13=1..." -> engine id and named knob choices;
// false when the text is not of that form (the frontend writes INVALID_ENGINE_NAME_* then).
inline bool parse_engine_tag(const std::string& tag, long long& engine_id, std::vector<KnobChoice>& knobs) {
  knobs.clear();
  if (tag.compare(0, 3, "eng") != 0) return false;
  const char* p = tag.c_str() + 3;
  char* end = nullptr;
  if (*p < '0' || *p > '9') return false;
  engine_id = std::strtoll(p, &end, 10);
  p = end;
  while (*p) {
    if (p[0] != '_' || p[1] != 'k' || p[2] < '0' || p[2] > '9') return false;
    long long type = std::strtoll(p + 2, &end, 10);
    if (*end != '=') return false;
    p = end + 1;
    if (!(*p == '-' || (*p >= '0' && *p <= '9'))) return false;
    long long value = std::strtoll(p, &end, 10);
    if (end == p) return false;
    p = end;
    knobs.emplace_back(knob_name(type), value);
  }
  return true;
}

// The canonical name of a frontend plan name ("" when it cannot be parsed).
inline std::string canonical_engine_name(const std::string& tag) {
  long long id = 0;
  std::vector<KnobChoice> knobs;
  return parse_engine_tag(tag, id, knobs) ? engine_config_name(id, knobs) : std::string();
}

}  // namespace bz
