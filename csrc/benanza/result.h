// benanza harness, one result line: the fields of benanza/records.py Result.
#pragma once

#include <optional>
#include <string>

#include "benanza/common.h"
#include "benanza/json.h"

namespace bz {

constexpr int kSchema = 1;  // benanza.SCHEMA_VERSION

// The fields of benanza/records.py Result; the harness adds event, job, api, l2, schema.
struct Result {
  std::string layer_key, algorithm, dtype, math, fusion, layout;
  Status status = Status::Ok;
  std::string message, timing;
  std::optional<double> median_ms, min_ms, max_ms, stddev_ms, host_ms, max_rel_error, tolerance;
  std::optional<long long> workspace_bytes;
  std::optional<int> heuristic_rank, find_rank;
  int repetitions = 0;
  Json notes;

  void fail(const Error& e) {
    status = e.status();
    message = e.what();
  }
};

}  // namespace bz
