// benanza harness: the one header every generated benchmark includes.
//
// A generated source declares its job table's columns and three functions, `load(row)` (one job
// of the table the harness reads at run time), `describe(job, json)` and `run(ctx, job)`, and
// hands them to bz::main.  The harness parses the command line, reads the job table, prints the
// system line, runs the selected jobs between start/end lines, times calls
// (bz::Context::measure) and prints one result line per benchmark (bz::Context::emit).  See
// docs/GENERATOR.md.
//
// The parts, one job each: options.h, job_table.h, result.h, buffers.h, stats.h, context.h, main.h.
#pragma once

#include "benanza/options.h"
#include "benanza/job_table.h"
#include "benanza/result.h"
#include "benanza/buffers.h"
#include "benanza/stats.h"
#include "benanza/context.h"
#include "benanza/main.h"
