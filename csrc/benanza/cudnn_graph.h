// benanza harness, cuDNN graph-API family (header-only cudnn-frontend): what the
// convolution and matmul graph benchmarks share.
//
// A benchmark's host-only work (prepare_graph, its Bench::prepare: on a host thread while jobs
// before it are measured, Prefetcher) declares its operation graph, then
//   1. enumerate_engine_configs: heuristic modes A, B and the fallback list, every
//      engine config each returns (cudnn-frontend create_execution_plans per mode, all
//      appended to one graph), deduped by canonical name, remembering each config's
//      rank in every list it appears in, and starts the configs' plan builds (PlanBuilder);
//   2. run_engine_configs, on the GPU thread: per config, its engine's numerical and behaviour notes
//      (backend ENGINE descriptor on the graph's operation graph), the fp32-FMA filter
//      (engines noted TENSOR_CORE or DOWN_CONVERT_INPUTS run TF32 on fp32 data), plan
//      build (timed: runtime-compiled engines compile here; on host threads ahead of the
//      GPU, PlanBuilder), workspace, one checked execution against the fp32 reference,
//      bz::Context::measure, and one result line, flushed as soon as that config is done.
// Every failure is a recorded status of that config, never a crash of the job.
// Runtime-compiled plans are kept in the per-system plan cache (PlanCache, plan_store.h) once built,
// and loaded from it instead of compiled when the same graph and config come again.
#pragma once

// cudnn-frontend's own headers trip two nvcc front-end diagnostics (an unreachable loop
// in a macro, an ignored [[nodiscard]]); they are the library's, not ours.
#ifdef __NVCC__
#pragma nv_diag_suppress 128
#pragma nv_diag_suppress 2810
#endif
#include <cudnn_frontend.h>
#ifdef __NVCC__
#pragma nv_diag_default 128
#pragma nv_diag_default 2810
#endif

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "benanza/bench.h"
#include "benanza/build_pool.h"
#include "benanza/cudnn_graph_names.h"
#include "benanza/cudnn_util.h"
#include "benanza/job_table.h"
#include "benanza/plan_store.h"

namespace bz {

namespace fe = cudnn_frontend;

// One attribute of a backend descriptor, as cudnnBackendSetAttribute takes it.
struct BackendAttr {
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type;
  int64_t count;
  const void* values;
};

// A finalized backend descriptor of `type` with `attrs` set (the engine, knob-choice and
// engine-config descriptors of a named engine config).
inline fe::ManagedOpaqueDescriptor backend_descriptor(cudnnBackendDescriptorType_t type,
                                                      std::initializer_list<BackendAttr> attrs) {
  auto d = fe::make_shared_backend_pointer(type);
  BZ_CHECK_CUDNN(d->get_status());
  for (const BackendAttr& a : attrs)
    BZ_CHECK_CUDNN(cudnnBackendSetAttribute(d->get_backend_descriptor(), a.name, a.type, a.count, a.values));
  BZ_CHECK_CUDNN(cudnnBackendFinalize(d->get_backend_descriptor()));
  return d;
}

// The process's plan cache: the store (PlanStore::default_dir; off without one), the device
// properties plans are loaded against (read-only, shared by the builder threads: cuDNN loads
// serialized plans without a handle), and the system part of every key (device, driver, cuDNN),
// so that a plan compiled for another GPU or library is never loaded. Off where cuDNN cannot
// describe the device (before 9.8).
class PlanCache {
 public:
  static PlanCache& instance(int device) {
    static PlanCache cache(device);
    return cache;
  }
  bool enabled() const { return store_.enabled() && props_ != nullptr && !system_.empty(); }
  // A job's key: the system, then the operation graph as cudnn-frontend serializes it (tensors,
  // uids, shapes, strides, types, nodes and their attributes, the library versions), without its
  // per-process graph id. An entry's key adds the engine config's plan name.
  std::string graph_key(const fe::graph::Graph& g) const {
#ifndef CUDNN_FRONTEND_SKIP_JSON_LIB
    nlohmann::json j;
    g.serialize(j);
    j.erase("gid");
    return system_ + "\n" + j.dump();
#else
    (void)g;
    return {};  // a build without the frontend's JSON library (CI's check-only build): no cache
#endif
  }
  std::optional<std::string> get(const std::string& key) const { return store_.get(key); }
  bool put(const std::string& key, const std::string& plan_json) const { return store_.put(key, plan_json); }
  const std::shared_ptr<fe::DeviceProperties>& props() const { return props_; }

 private:
  explicit PlanCache(int device) : store_(PlanStore::default_dir()) {
    if (!store_.enabled()) return;
    cudaDeviceProp p{};
    int driver = 0;
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess || cudaDriverGetVersion(&driver) != cudaSuccess) return;
    auto props = std::make_shared<fe::DeviceProperties>();
    props->set_device_id(device);
    if (props->build().is_bad()) return;
    props_ = std::move(props);
#ifndef CUDNN_FRONTEND_SKIP_JSON_LIB  // else no graph has a key: the cache stays off
    system_ = std::string("gpu ") + p.name + " sm_" + std::to_string(p.major) + std::to_string(p.minor) + " sms " +
              std::to_string(p.multiProcessorCount) + " driver " + std::to_string(driver) + " cudnn " +
              std::to_string(cudnnGetVersion());
#endif
  }
  PlanStore store_;
  std::shared_ptr<fe::DeviceProperties> props_;
  std::string system_;
};

// A frontend graph that also hands out what the benchmarks read beside the frontend's
// API: the backend operation graph (for engine notes), the release of a plan once
// it has been measured (so hundreds of configs never hold their kernels at once), and
// plans kept in and loaded from the plan cache.
class FeGraph : public fe::graph::Graph {
 public:
  // Plan `index` loaded from the cache entry `key`: true when there was one and cuDNN took it
  // (build_plan_at_index then creates nothing); false leaves the plan to be built.
  bool load_plan(const PlanCache& cache, int64_t index, const std::string& key) {
    const std::optional<std::string> json = cache.get(key);
    if (!json) return false;
    std::shared_ptr<fe::ExecutionPlan> plan;
    if (fe::detail::create_cudnn_execution_plan(plan, *json, cache.props()).is_bad() || !plan) return false;
    plans.get_execution_plans()[size_t(index)] = std::move(plan);
    return true;
  }
  // Keeps built plan `index` under `key` when its engine compiled its kernels at run time (the
  // plans cuDNN serializes, and the only ones whose build costs more than a fraction of a ms).
  bool keep_plan(const PlanCache& cache, int64_t index, const std::string& key) {
    const auto& plan = plans.get_execution_plans()[size_t(index)];
    if (!plan) return false;
    const auto& notes = plan->getAllBehaviorNotes();
    if (std::find(notes.begin(), notes.end(), CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) == notes.end()) return false;
    return cache.put(key, plan->getJsonRepresentation());
  }

  cudnnBackendDescriptor_t op_graph() const { return operation_graph ? operation_graph->get_raw_desc() : nullptr; }
  void release_plan(int64_t index) {
    auto& built = plans.get_execution_plans();
    if (index >= 0 && size_t(index) < built.size()) built[size_t(index)].reset();
  }

  // Appends one engine config, given by global engine index and knob choices, as the graph's
  // next plan and returns its index. Built from backend descriptors: the framework logs' knobs
  // include types cudnn-frontend's KnobType_t no longer names (USE_TEX).
  int64_t add_engine_config(long long engine_id, const std::vector<KnobChoice>& knobs) {
    cudnnBackendDescriptor_t graph_desc = op_graph();
    const int64_t global_index = engine_id;
    auto engine = backend_descriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                                     {{CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph_desc},
                                      {CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &global_index}});
    std::vector<fe::ManagedOpaqueDescriptor> choices;  // owners of the raw descriptors below
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const auto& [name, value] : knobs) {
      const long long type = knob_type(name);
      if (type < 0) throw Error(Status::Failed, "unknown knob type '" + name + "'");
      const auto knob = cudnnBackendKnobType_t(type);
      const int64_t knob_value = value;
      choices.push_back(backend_descriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
                                           {{CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &knob},
                                            {CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &knob_value}}));
      raw.push_back(choices.back()->get_backend_descriptor());
    }
    cudnnBackendDescriptor_t engine_desc = engine->get_backend_descriptor();
    auto config = backend_descriptor(
        CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
        {{CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine_desc},
         {CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()), raw.data()}});
    plans.enqueue_engine_configs({config});
    fe::error_t queried = plans.query_properties();
    if (queried.is_bad()) throw Error(Status::Failed, "query_properties: " + queried.get_message());
    return get_execution_plan_count() - 1;
  }
};

// Multi-line frontend messages as one line, capped (result messages are one line).
inline std::string one_line(const std::string& text, size_t max_chars = 400) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += " | ";
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '|')) out.pop_back();
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

// A frontend call's error as a bz::Error: NOT_SUPPORTED anywhere in it reads as not_supported.
inline void check_fe(fe::error_t e, Status otherwise, const char* what) {
  if (e.is_good()) return;
  const std::string msg = e.get_message();
  const bool unsupported = msg.find("NOT_SUPPORTED") != std::string::npos;
  throw Error(unsupported ? Status::NotSupported : otherwise, std::string(what) + ": " + one_line(msg));
}

inline fe::DataType_t fe_type(cudnnDataType_t t) { return fe::detail::convert_from_cudnn_type(t); }

// Strides of an N x C x H x W (or K x C x R x S) tensor in NCHW, or NHWC (KRSC) order.
inline std::vector<int64_t> strides_4d(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  (void)n;
  return nhwc ? std::vector<int64_t>{h * w * c, 1, w * c, c} : std::vector<int64_t>{c * h * w, h * w, w, 1};
}

// ---------------------------------------------------------------- engine configs

// Heuristic modes in query order, with the names notes.heuristics uses.
struct HeurModeName {
  fe::HeurMode_t mode;
  const char* name;
};
inline const HeurModeName kHeurModes[] = {
    {fe::HeurMode_t::A, "A"}, {fe::HeurMode_t::B, "B"}, {fe::HeurMode_t::FALLBACK, "fallback"}};
constexpr size_t kNumHeurModes = 3;

struct EngineConfig {
  std::string name;  // canonical (engine_config_name), or the frontend's text when it does not parse
  std::string tag;   // the frontend's plan name (numeric knob types)
  bool parsed = false;
  std::optional<Error> error;  // a named config that could not be set up
  long long engine_id = -1;
  std::vector<KnobChoice> knobs;
  int64_t index = 0;                                       // plan index in the graph (first occurrence)
  std::array<std::optional<int>, kNumHeurModes> ranks{};  // position in each mode's list
};

struct EngineList {
  std::vector<EngineConfig> configs;  // A's order, then B's new ones, then the fallback's new ones
  bool named = false;                 // the plan named these configs (no heuristic query, no --max-engines)
  std::array<int, kNumHeurModes> counts{};
  std::array<std::string, kNumHeurModes> errors;  // a mode whose query failed
};

// Every engine config of heuristic modes A, B and FALLBACK on a built operation graph.
inline EngineList enumerate_engine_configs(FeGraph& g) {
  EngineList out;
  std::map<std::string, size_t> seen;
  for (size_t m = 0; m < kNumHeurModes; ++m) {
    const int64_t before = g.get_execution_plan_count();
    fe::error_t e = g.create_execution_plans({kHeurModes[m].mode});
    const int64_t after = g.get_execution_plan_count();
    if (e.is_bad()) out.errors[m] = one_line(e.get_message(), 200);
    out.counts[m] = int(after - before);
    for (int64_t i = before; i < after; ++i) {
      std::string tag;
      if (g.get_plan_name_at_index(i, tag).is_bad()) tag = "plan" + std::to_string(i);
      EngineConfig c;
      c.tag = tag;
      c.parsed = parse_engine_tag(tag, c.engine_id, c.knobs);
      c.name = c.parsed ? engine_config_name(c.engine_id, c.knobs) : tag;
      auto it = seen.find(c.name);
      if (it == seen.end()) {
        c.index = i;
        c.ranks[m] = int(i - before);
        seen.emplace(c.name, out.configs.size());
        out.configs.push_back(std::move(c));
      } else if (!out.configs[it->second].ranks[m]) {
        out.configs[it->second].ranks[m] = int(i - before);
      }
    }
  }
  return out;
}

// One engine config a job names (benanza.plan.with_named_configs): the framework's own choice.
struct NamedEngineConfig {
  int job;
  long long engine_id;
  std::vector<KnobChoice> knobs;
};

// The engine configs a job of the table names, appended to `out` under `job`: the cells of its
// "engines" column, each "id" or "id,KNOB=value,..." (benanza/apis/graph.py engine_cells).
inline void add_named_configs(const JobRow& r, size_t c, int job, std::vector<NamedEngineConfig>& out) {
  auto number = [&](const std::string& text, const std::string& cell) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE || text[0] == '+' || std::isspace((unsigned char)text[0]))
      r.fail(c, "not an engine config '" + cell + "'");
    return v;
  };
  for (const std::string& cell : r.texts(c)) {
    const std::vector<std::string> parts = table_detail::split(cell, ',');
    NamedEngineConfig n{job, number(parts[0], cell), {}};
    if (n.engine_id < 0) r.fail(c, "not an engine config '" + cell + "'");
    for (size_t i = 1; i < parts.size(); ++i) {
      const size_t eq = parts[i].find('=');
      const std::string knob = parts[i].substr(0, eq);
      if (eq == std::string::npos || knob.empty() ||
          knob.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
        r.fail(c, "not an engine config '" + cell + "'");
      n.knobs.emplace_back(knob, number(parts[i].substr(eq + 1), cell));
    }
    out.push_back(std::move(n));
  }
}

// The engine configs `job` names, each added to the graph as a plan of its own; a config
// cuDNN refuses for this graph keeps its error and becomes that config's result.
inline EngineList named_engine_configs(FeGraph& g, int job, const std::vector<NamedEngineConfig>& named) {
  EngineList out;
  out.named = true;
  for (const NamedEngineConfig& n : named) {
    if (n.job != job) continue;
    EngineConfig c;
    c.parsed = true;
    c.engine_id = n.engine_id;
    c.knobs = n.knobs;
    c.name = c.tag = engine_config_name(n.engine_id, n.knobs);
    try {
      c.index = g.add_engine_config(n.engine_id, n.knobs);
    } catch (const Error& e) {
      c.error = e;
      c.index = -1;  // no plan of its own to release
    }
    out.configs.push_back(std::move(c));
  }
  return out;
}

// What a job measures: the configs the plan names for it, else every config of the heuristics.
inline EngineList engine_configs(FeGraph& g, int job, const std::vector<NamedEngineConfig>& named) {
  for (const NamedEngineConfig& n : named)
    if (n.job == job) return named_engine_configs(g, job, named);
  return enumerate_engine_configs(g);
}

// Numerical and behaviour notes of one engine on an operation graph (backend ENGINE descriptor).
struct EngineNotes {
  std::vector<int> numerical, behavior;  // cudnnBackendNumericalNote_t / cudnnBackendBehaviorNote_t values
  bool known = false;
  bool has_numerical(cudnnBackendNumericalNote_t n) const {
    for (int v : numerical)
      if (v == int(n)) return true;
    return false;
  }
};

inline EngineNotes engine_notes(cudnnBackendDescriptor_t op_graph, long long engine_id) {
  EngineNotes notes;
  if (!op_graph || engine_id < 0) return notes;
  cudnnBackendDescriptor_t engine = nullptr;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return notes;
  int64_t index = engine_id;
  bool ok = cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &op_graph) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index) ==
                CUDNN_STATUS_SUCCESS &&
            cudnnBackendFinalize(engine) == CUDNN_STATUS_SUCCESS;
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> num{};
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> beh{};
  int64_t n_num = 0, n_beh = 0;
  ok = ok &&
       cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                int64_t(num.size()), &n_num, num.data()) == CUDNN_STATUS_SUCCESS &&
       cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                int64_t(beh.size()), &n_beh, beh.data()) == CUDNN_STATUS_SUCCESS;
  cudnnBackendDestroyDescriptor(engine);
  if (!ok) return notes;
  for (int64_t i = 0; i < std::min<int64_t>(n_num, int64_t(num.size())); ++i) notes.numerical.push_back(int(num[i]));
  for (int64_t i = 0; i < std::min<int64_t>(n_beh, int64_t(beh.size())); ++i) notes.behavior.push_back(int(beh[i]));
  notes.known = true;
  return notes;
}

template <size_t N>
inline std::string json_names(const char* const (&table)[N], const std::vector<int>& values, const char* unknown) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + Json::quote(enum_name(table, values[i], unknown));
  return out + "]";
}

inline std::string json_knobs(const std::vector<KnobChoice>& knobs) {
  Json j;
  for (const auto& [name, value] : knobs) j.add(name.c_str(), value);
  return j.str();
}

inline std::string json_ranks(const EngineConfig& c) {
  Json j;
  for (size_t m = 0; m < kNumHeurModes; ++m)
    if (c.ranks[m]) j.add(kHeurModes[m].name, *c.ranks[m]);
  return j.str();
}

inline std::string json_heuristics(const EngineList& list) {
  Json counts, errors;
  for (size_t m = 0; m < kNumHeurModes; ++m) {
    counts.add(kHeurModes[m].name, list.counts[m]);
    if (!list.errors[m].empty()) errors.add(kHeurModes[m].name, list.errors[m]);
  }
  return Json().raw("counts", counts.str()).raw("errors", errors.str()).str();
}

// ---------------------------------------------------------------- the benchmark loop

// What one graph benchmark's GPU thread measures its prepared graph (GraphPrep) with: the variant
// pack, the output buffer and the spans of it its fp32 reference covers (all of it, or a
// convolution's checked batch entries: ConvReference), and the ring the weight tensor's pointer
// comes from (Context::weight_ring; the buffer alone but under --l2 cold-weights).
struct GraphRun {
  std::unordered_map<int64_t, void*>& pack;
  const Buffer& y;
  std::vector<CheckedSpan> checked;
  WeightRing& weights;
  int64_t weight_uid;  // the variant pack's uid of the weight tensor
};

// One result with `status` for a job whose graph could not be set up or offered no
// engine config at all (algorithm "heuristic", as cublasLtMatmul's benchmark does).
inline void emit_job_failure(Context& ctx, int job, const Result& base, const Error& e, const std::string& notes = "") {
  Result r = base;
  r.algorithm = "heuristic";
  r.fail(e);
  if (!notes.empty()) r.notes.raw("heuristics", notes);
  ctx.emit(job, r);
}

// Prepares (engine notes) and builds a job's execution plans on the process's pool of --plan-threads
// host threads (BuildPool, one BuildQueue per job, the earliest job first) ahead of the GPU thread,
// which measures them in the order their builds finish (next()): runtime-compiled engines (NVRTC)
// compile while other configs are timed, and while the GPU thread is on an earlier job. At most
// 2 x threads plans are built or building and not yet taken (a built plan holds its kernels until
// FeGraph::release_plan). Each config is prepared and built by one thread; cudnn-frontend builds a
// plan without a handle (its own engine config and execution-plan descriptors), so no handle is
// shared. threads 0: no pool; next() prepares and builds each config itself, in order, on the GPU
// thread.
class PlanBuilder {
 public:
  struct Built {
    fe::error_t status{fe::error_code_t::OK, ""};
    double ms = 0;  // the build's own time, on whichever thread built it
    const char* cache = nullptr;  // "hit": loaded from the plan cache; "kept": built and kept there
  };
  // Config i's plan index, -1 for one not to build; called once per config, on a builder thread.
  using Prepare = std::function<int64_t(size_t)>;

  // `key`: the job's plan-cache key (PlanCache::graph_key; empty: no cache), `tags` each config's
  // plan name, which the key of its entry adds.
  PlanBuilder(FeGraph& g, size_t configs, Prepare prepare, int device, int threads, std::string key = {},
              std::vector<std::string> tags = {})
      : g_(g), prepare_(std::move(prepare)), built_(configs), device_(device), key_(std::move(key)),
        tags_(std::move(tags)) {
    if (threads <= 0 || configs == 0) return;
    // the pool's threads on the benchmark's device: plans load their kernels into its context
    BuildPool& pool = BuildPool::instance(threads, [device] {
      cudaSetDevice(device);
      ignore_other_threads_captures();
    });
    queue_ = std::make_unique<BuildQueue>(pool, configs, size_t(2 * pool.threads()),
                                          [this](size_t i) { built_[i] = build(i); });
  }
  // queue_ goes first: it cancels the builds not started and waits for those under way (they
  // write built_ and read g_ and prepare_'s objects, which outlive it).
  ~PlanBuilder() = default;
  PlanBuilder(const PlanBuilder&) = delete;
  PlanBuilder& operator=(const PlanBuilder&) = delete;

  // The next config to measure and its build: the lowest-indexed config whose build is done and
  // that was not taken yet, waiting while there is none. Measuring in the order builds finish
  // keeps the GPU timing built plans while slow (runtime-compiled) ones compile; without threads
  // the configs come in order, each built here.
  std::pair<size_t, Built> next() {
    if (!queue_) {
      const size_t i = taken_count_++;
      return {i, build(i)};
    }
    const size_t i = queue_->next();  // built_[i] was written before its build was marked done
    return {i, built_[i]};
  }

 private:
  Built build(size_t i) {
    Built b;
    const int64_t index = prepare_(i);
    if (index < 0) return b;
    const auto t0 = std::chrono::steady_clock::now();
    const bool cached = !key_.empty() && i < tags_.size();
    const std::string entry = cached ? key_ + "\nplan " + tags_[i] : std::string();
    if (cached) {
      try {  // an entry cuDNN refuses (or one that cannot be read) is a miss: the plan is compiled
        if (g_.load_plan(PlanCache::instance(device_), index, entry)) b.cache = "hit";
      } catch (const std::exception&) {
      }
    }
    try {
      b.status = g_.build_plan_at_index(index);
    } catch (const std::exception& e) {  // cudnn-frontend builders may throw cudnnException
      b.status = fe::error_t{fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, e.what()};
    } catch (...) {
      b.status = fe::error_t{fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "unknown exception"};
    }
    b.ms = ms_since(t0);
    if (cached && !b.cache && b.status.is_good()) {
      try {  // a plan that cannot be kept is still measured
        if (g_.keep_plan(PlanCache::instance(device_), index, entry)) b.cache = "kept";
      } catch (const std::exception&) {
      }
    }
    return b;
  }

  FeGraph& g_;
  Prepare prepare_;
  std::vector<Built> built_;  // element i written by the one pool thread that builds config i
  int device_;
  std::string key_;
  std::vector<std::string> tags_;
  size_t taken_count_ = 0;    // threads 0: configs built so far
  std::unique_ptr<BuildQueue> queue_;  // last: destroyed first (see ~PlanBuilder)
};

// What the GPU thread knows of a config before its plan is built: its engine's notes, and why
// it is not built at all (a named config cuDNN refused, an unparsed name, a TF32 engine on fp32).
struct ConfigPrep {
  EngineNotes notes;
  std::optional<Error> skip;
};

inline ConfigPrep prepare_config(const EngineConfig& c, cudnnBackendDescriptor_t op_graph, bool fma_only,
                                 bool tensor_core_ops) {
  ConfigPrep prep;
  if (c.error) {
    prep.skip = *c.error;
    return prep;
  }
  if (!c.parsed) {
    prep.skip = Error(Status::Failed, "cudnn-frontend plan name '" + c.tag + "' is not eng<id>_k<knob>=<v>");
    return prep;
  }
  prep.notes = engine_notes(op_graph, c.engine_id);
  if (fma_only && ((tensor_core_ops && prep.notes.has_numerical(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) ||
                   prep.notes.has_numerical(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
    prep.skip = Error(Status::NotSupported, "tf32 engine excluded under fp32 FMA");
  return prep;
}

// A job's host-only work (GraphPrep, made by prepare_graph): its operation graph built on `handle`,
// its engine configs listed, and their preparation and plan builds under way; or the error that
// ended it (the job's one failure result). Nothing in it touches device memory or the stream.
struct GraphPrep {
  cudnnHandle_t handle = nullptr;  // the graph's: its plans execute with it
  FeGraph graph;
  EngineList list;
  std::optional<Error> error;
  double host_ms = 0;  // its host time (Phase::HostPrep)
  size_t limit = 0;    // configs to measure (--max-engines)
  std::vector<ConfigPrep> preps;  // element ci written by the one builder thread that prepares ci
  std::unique_ptr<PlanBuilder> builder;  // last: it goes first, waiting for the pool threads that
                                         // build its configs (they read the members above)
};

// A graph benchmark's Bench::prepare: declare(graph) declares the job's operation graph, which is
// validated and built on host.cudnn; then its engine configs (engine_configs) and, when there are
// any, their preparation and plan builds on the --plan-threads pool (PlanBuilder; started at once,
// served after every earlier job's builds). A failure is kept in the GraphPrep, as the
// GPU thread would have met it, never thrown. `tensor_core_ops`: false for a graph with no matmul
// or convolution (a pointwise chain): a TENSOR_CORE note on its engine changes no arithmetic, so
// fp32 FMA keeps it.
template <class Declare>
std::shared_ptr<GraphPrep> prepare_graph(const HostContext& host, int job, const std::vector<NamedEngineConfig>& named,
                                         const CudnnPrecision& p, bool tensor_core_ops, Declare&& declare) {
  auto t0 = std::chrono::steady_clock::now();
  auto prep = std::make_shared<GraphPrep>();
  prep->handle = host.cudnn;
  try {
    declare(prep->graph);
    check_fe(prep->graph.validate(), Status::NotSupported, "validate");
    check_fe(prep->graph.build_operation_graph(host.cudnn), Status::NotSupported, "build_operation_graph");
    prep->list = engine_configs(prep->graph, job, named);
  } catch (const Error& e) {
    prep->error = e;
  } catch (const std::exception& e) {
    prep->error = Error(Status::Failed, one_line(e.what()));
  }
  prep->host_ms = ms_since(t0);
  if (prep->error || prep->list.configs.empty()) return prep;
  const bool fma_only = p.math_type == CUDNN_FMA_MATH;  // fp32: no TF32 Tensor Core engines
  const EngineList& list = prep->list;
  prep->limit = host.opt.max_engines > 0 && !list.named ? std::min(list.configs.size(), size_t(host.opt.max_engines))
                                                        : list.configs.size();
  prep->preps.resize(prep->limit);
  GraphPrep* self = prep.get();
  auto prepare = [self, fma_only, tensor_core_ops](size_t ci) -> int64_t {  // on a builder thread: nothing may escape
    ConfigPrep& c = self->preps[ci];
    try {
      c = prepare_config(self->list.configs[ci], self->graph.op_graph(), fma_only, tensor_core_ops);
    } catch (const Error& e) {
      c.skip = e;
    } catch (const std::exception& e) {
      c.skip = Error(Status::Failed, std::string("engine notes: ") + one_line(e.what()));
    }
    return c.skip ? -1 : self->list.configs[ci].index;
  };
  t0 = std::chrono::steady_clock::now();
  std::string key;
  std::vector<std::string> tags;
  const PlanCache& cache = PlanCache::instance(host.opt.device);
  if (cache.enabled()) {
    try {
      key = cache.graph_key(prep->graph);
      for (size_t ci = 0; ci < prep->limit; ++ci) tags.push_back(list.configs[ci].tag);
    } catch (const std::exception&) {  // a graph the frontend cannot serialize is built, not cached
      key.clear();
    }
  }
  prep->builder = std::make_unique<PlanBuilder>(prep->graph, prep->limit, prepare, host.opt.device,
                                                host.opt.plan_threads, std::move(key), std::move(tags));
  prep->host_ms += ms_since(t0);
  return prep;
}

// The job's GraphPrep: prepared ahead by the Prefetcher (Context::prepared), else made here, on the
// GPU thread, with the Context's handle (--plan-threads 0). PrepWait: the GPU thread's time on it;
// HostPrep: its own host time.
inline std::shared_ptr<GraphPrep> graph_prep(Context& ctx, int job, Prepared (*prepare)(const HostContext&, int)) {
  std::shared_ptr<GraphPrep> prep = std::static_pointer_cast<GraphPrep>(ctx.prepared(job));
  if (!prep) {
    const cudnnHandle_t handle = ctx.cudnn();  // its creation is Phase::Handles
    const auto t0 = std::chrono::steady_clock::now();
    prep = std::static_pointer_cast<GraphPrep>(prepare(HostContext{ctx.opt, handle}, job));
    ctx.phases.add(Phase::PrepWait, ms_since(t0));
  }
  ctx.bind_to_benchmark_stream(prep->handle);  // prepared on the worker's stream (create_job_handles)
  ctx.phases.add(Phase::HostPrep, prep->host_ms);
  return prep;
}

// Check, time and emit every engine config of a prepared job (up to --max-engines), in the order
// their builds finish; a job whose preparation failed gets that failure as its one result.
// With --race, in two passes: each config is checked and estimated as it comes; one the job's best
// estimate so far already races is timed coarsely at once, the others (one may be the best) keep
// their plans until every estimate is in, and are then timed against the job's best of all, so a
// config is never timed in full only because the best came after it.
inline void run_engine_configs(Context& ctx, int job, const Result& base, const CudnnPrecision& p, GraphRun& run,
                               GraphPrep& prep) {
  if (prep.error) {  // the graph or its heuristics failed (prepared ahead or not): the job's one result
    emit_job_failure(ctx, job, base, *prep.error);
    return;
  }
  const EngineList& list = prep.list;
  if (list.configs.empty()) {
    emit_job_failure(ctx, job, base, Error(Status::NotSupported, "no heuristic mode returned an engine config"),
                     json_heuristics(list));
    return;
  }
  FeGraph& graph = prep.graph;
  PlanBuilder& builder = *prep.builder;
  const size_t limit = prep.limit;
  auto execute = [&](const EngineConfig& c, const Workspace& work, void* weights) {  // one execution
    run.pack[run.weight_uid] = weights;
    check_fe(graph.execute_plan_at_index(prep.handle, run.pack, work.get(), c.index), Status::Failed,
             "execute_plan_at_index");
  };
  // A config estimated and kept for the second pass.
  struct Kept {
    Result r;
    size_t ci;
    bool protect;
    Estimate estimate;
  };
  std::vector<Kept> kept;
  // Runs `step` for the config of `r`; what it throws becomes r's status.
  auto guarded = [](Result& r, auto&& step) {
    try {
      step();
    } catch (const Error& err) {
      r.fail(err);
    } catch (const std::exception& err) {  // cudnn-frontend builders may throw cudnnException
      r.fail(Error(Status::Failed, std::string("cudnn-frontend: ") + one_line(err.what())));
    }
  };
  // Emits a config's result and releases its plan.
  auto done = [&](const Result& r, const EngineConfig& c) {
    graph.release_plan(c.index);
    ctx.emit(job, r);
  };
  // Times a checked config from its estimate, then emits it.
  auto finish = [&](Result& r, const EngineConfig& c, bool protect, const Estimate& e) {
    guarded(r, [&] {
      const Workspace work = ctx.workspace(static_cast<size_t>(r.workspace_bytes.value_or(0)));
      Context::record(r, ctx.time_estimated([&](cudaStream_t) { execute(c, work, run.weights.next()); },
                                            run.weights, protect, e));
    });
    done(r, c);
  };
  for (size_t step = 0; step < limit; ++step) {
    const auto t_next = std::chrono::steady_clock::now();
    const std::pair<size_t, PlanBuilder::Built> ready = builder.next();  // configs not built come at once
    const size_t ci = ready.first;
    const PlanBuilder::Built& built = ready.second;
    ctx.phases.add(Phase::PlanWait, ms_since(t_next));
    const EngineConfig& c = list.configs[ci];
    const ConfigPrep& config_prep = prep.preps[ci];
    Result r = base;
    r.algorithm = c.name;
    r.heuristic_rank = c.ranks[0];
    r.notes.add("engine_id", c.engine_id).raw("knobs", json_knobs(c.knobs)).add("plan_name", c.tag);
    r.notes.raw("heuristics", json_ranks(c)).add("config", int(ci)).add("configs", int(list.configs.size()));
    if (list.named) r.notes.add("named", true);
    const bool protect = list.named || Context::is_first_choice(r);  // never raced
    std::optional<Estimate> estimate;  // the config checked and estimated
    guarded(r, [&] {
      if (c.parsed && !c.error) {
        if (config_prep.notes.known) {
          r.notes.raw("numerical_notes", json_names(kNumericalNoteNames, config_prep.notes.numerical, "NOTE"));
          r.notes.raw("behavior_notes", json_names(kBehaviorNoteNames, config_prep.notes.behavior, "NOTE"));
        } else {
          r.notes.add("notes_error", "engine notes could not be queried");
        }
      }
      if (config_prep.skip) throw *config_prep.skip;
      r.notes.add("build_ms", built.ms);
      if (built.cache) r.notes.add("plan_cache", built.cache);
      check_fe(built.status, Status::NotSupported, "build_plan_at_index");
      int64_t ws = 0;
      check_fe(graph.get_workspace_size_plan_at_index(c.index, ws), Status::Failed,
               "get_workspace_size_plan_at_index");
      r.workspace_bytes = (long long)ws;
      const Workspace work = ctx.workspace(static_cast<size_t>(ws));
      BZ_CHECK_CUDA(cudaMemsetAsync(run.y.get(), 0xff, run.y.bytes(), ctx.stream));  // NaN: must be written
      const double first = ctx.time_call([&] { execute(c, work, run.weights.first()); });  // copy 0, as the reference
      ctx.check(r, run.y.get(), p.storage, run.checked, p.tolerance);
      estimate = ctx.estimate([&](cudaStream_t) { execute(c, work, run.weights.next()); }, protect, first);
    });
    if (!estimate) {
      done(r, c);
    } else if (ctx.opt.race > 0 && !ctx.would_be_coarse(*estimate, protect)) {  // may be the best: time it last
      ctx.note_estimate(*estimate);
      kept.push_back(Kept{std::move(r), ci, protect, *estimate});
    } else {
      finish(r, c, protect, *estimate);
    }
  }
  for (Kept& k : kept) finish(k.r, list.configs[k.ci], k.protect, k.estimate);
}

}  // namespace bz
