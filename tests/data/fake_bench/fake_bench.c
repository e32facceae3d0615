/* A real benchmark executable for the runner's tests: it speaks the stdout protocol
 * of benanza/records.py (system line; per job start, result lines, end), and each
 * job behaves as its plan file says: $FAKE_BENCH_PLAN/<executable name>.plan, lines of
 *
 *   <job> <behaviour> <layer_key> <api> <dtype> <math> <fusion> <n_algorithms>
 *
 * behaviours: ok, mixed (ok and not_supported results), slow (ok after 150 ms),
 * steady (600 ms before each result: slower in total than the tests' timeout, never silent that long),
 * segv (raises SIGSEGV mid-job), hang (sleeps forever mid-job), exit (exit 3
 * mid-job), garbage (a non-JSON line inside the job), badevent (an unknown event),
 * skip (silently never runs the job), endhang (ok, then sleeps forever after its end),
 * error (an "error" event, then its end), sticky (an "error" event, then exit 3, as the
 * real harness does when the CUDA context is lost); bad result lines (valid JSON, wrong content):
 * badtype ("median_ms":"fast"), bigint (an integer >= 2^64), nan (NaN median), negative (-5 ms),
 * listfield (a list where a string belongs), badstart (a start whose job is a list); partial (half a
 * result line, no newline, then exit 0); fork (forks a child that keeps stdout open and sleeps, then
 * the job ends ok).  $FAKE_BENCH_PIDS names a directory where every process (forked children
 * included) creates a file named by its pid, so tests can check that none is left running.  $FAKE_BENCH_GPU renames the GPU,
 * so that tests can play two systems; $FAKE_BENCH_NO_DEVICE makes it fail at start-up
 * the way the real harness does without a GPU.  --plan-threads N and --max-engines N are taken and told
 * back in every job's end line ("phases_ms":{"plan_threads":N,"max_engines":N}), so that tests see what
 * reached the process.
 * --serve, as the real harness: after the system line, one job list per stdin line (--jobs' form),
 * each run as --jobs would, then a "ready" line; exit at the end of the input.
 *
 * usage: bench_x [--jobs 0,3,5-9 | --serve] [--l2 warm|cold] [--max-reps N] [--plan-threads N] [--max-engines N]
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_JOBS 4096

struct job {
  int defined;
  char behaviour[32], layer_key[64], api[96], dtype[16], math[32], fusion[32];
  int n_algorithms;
};

static struct job plan[MAX_JOBS];
static int wanted[MAX_JOBS];

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int read_plan(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  struct job j;
  int index;
  while (fscanf(f, "%d %31s %63s %95s %15s %31s %31s %d", &index, j.behaviour, j.layer_key, j.api, j.dtype, j.math,
                j.fusion, &j.n_algorithms) == 8) {
    if (index < 0 || index >= MAX_JOBS) {
      fclose(f);
      return -1;
    }
    j.defined = 1;
    plan[index] = j;
  }
  fclose(f);
  return 0;
}

static int parse_jobs(const char* spec) {
  char* copy = strdup(spec);
  for (char* part = strtok(copy, ","); part; part = strtok(NULL, ",")) {
    int lo, hi;
    if (sscanf(part, "%d-%d", &lo, &hi) == 2) {
    } else if (sscanf(part, "%d", &lo) == 1) {
      hi = lo;
    } else {
      free(copy);
      return -1;
    }
    for (int i = lo; i <= hi && i < MAX_JOBS; ++i)
      if (i >= 0) wanted[i] = 1;
  }
  free(copy);
  return 0;
}

static void note_pid(void) {
  const char* dir = getenv("FAKE_BENCH_PIDS");
  if (!dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
  int fd = open(path, O_CREAT | O_WRONLY, 0644);
  if (fd >= 0) close(fd);
}

/* A valid-JSON result line whose content is wrong in the way ``b`` says. */
static void bad_result(int index, const struct job* j, const char* b, const char* l2) {
  const char* median = "0.5";
  const char* algorithm = "\"algo0\"";
  const char* reps = "100";
  if (strcmp(b, "badtype") == 0) median = "\"fast\"";
  if (strcmp(b, "nan") == 0) median = "NaN";
  if (strcmp(b, "negative") == 0) median = "-5.0";
  if (strcmp(b, "bigint") == 0) reps = "18446744073709551616";
  if (strcmp(b, "listfield") == 0) algorithm = "[\"algo0\", {\"x\": 1}]";
  printf("{\"event\":\"result\",\"job\":%d,\"layer_key\":\"%s\",\"api\":\"%s\",\"algorithm\":%s,"
         "\"dtype\":\"%s\",\"math\":\"%s\",\"fusion\":\"%s\",\"status\":\"ok\",\"l2\":\"%s\","
         "\"repetitions\":%s,\"timing\":\"stream\",\"median_ms\":%s}\n",
         index, j->layer_key, j->api, algorithm, j->dtype, j->math, j->fusion, l2, reps, median);
  fflush(stdout);
}

static int is_bad_result(const char* b) {
  return strcmp(b, "badtype") == 0 || strcmp(b, "nan") == 0 || strcmp(b, "negative") == 0 ||
         strcmp(b, "bigint") == 0 || strcmp(b, "listfield") == 0;
}

static void result(int index, const struct job* j, int algo, const char* status, const char* l2) {
  double ms = 0.01 * (index + 1) * (algo + 1);
  int ok = strcmp(status, "ok") == 0;
  printf("{\"event\":\"result\",\"job\":%d,\"layer_key\":\"%s\",\"api\":\"%s\",\"algorithm\":\"algo%d\","
         "\"dtype\":\"%s\",\"math\":\"%s\",\"fusion\":\"%s\",\"status\":\"%s\",\"l2\":\"%s\","
         "\"repetitions\":%d,\"timing\":\"stream\",\"workspace_bytes\":%d,\"fake_knob\":%d",
         index, j->layer_key, j->api, algo, j->dtype, j->math, j->fusion, status, l2, ok ? 100 : 0, algo * 1024,
         algo);
  if (ok) printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"max_ms\":%.6f,\"stddev_ms\":%.6f", ms, ms * 0.9, ms * 1.2,
                 ms * 0.01);
  printf("}\n");
  fflush(stdout);
}

static void run_wanted(const char* l2, int plan_threads, int max_engines);

int main(int argc, char** argv) {
  const char* jobs = NULL;
  const char* l2 = "warm";
  int plan_threads = -1, max_engines = -1, serve = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
      jobs = argv[++i];
    } else if (strcmp(argv[i], "--serve") == 0) {
      serve = 1;
    } else if (strcmp(argv[i], "--l2") == 0 && i + 1 < argc) {
      l2 = argv[++i];
    } else if (strcmp(argv[i], "--max-reps") == 0 && i + 1 < argc) {
      ++i;
    } else if (strcmp(argv[i], "--plan-threads") == 0 && i + 1 < argc) {
      plan_threads = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--max-engines") == 0 && i + 1 < argc) {
      max_engines = atoi(argv[++i]);
    } else {
      fprintf(stderr, "%s: unknown argument %s\n", argv[0], argv[i]);
      return 2;
    }
  }
  const char* plan_dir = getenv("FAKE_BENCH_PLAN");
  const char* name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  char plan_path[4096];
  snprintf(plan_path, sizeof plan_path, "%s/%s.plan", plan_dir ? plan_dir : ".", name);
  if (read_plan(plan_path) != 0) {
    fprintf(stderr, "%s: cannot read the plan file %s\n", argv[0], plan_path);
    return 2;
  }
  if (jobs) {
    if (parse_jobs(jobs) != 0) {
      fprintf(stderr, "%s: bad --jobs %s\n", argv[0], jobs);
      return 2;
    }
  } else {
    for (int i = 0; i < MAX_JOBS; ++i) wanted[i] = plan[i].defined;
  }
  note_pid();
  if (getenv("FAKE_BENCH_NO_DEVICE")) {
    printf("{\"event\":\"error\",\"message\":\"no usable CUDA device: cudaErrorNoDevice\"}\n");
    return 2;
  }
  /* FAKE_BENCH_SLOW_START=NAME:MS: executable NAME takes MS to its system line (a CUDA context, handles) */
  const char* slow = getenv("FAKE_BENCH_SLOW_START");
  if (slow && strncmp(slow, name, strlen(name)) == 0 && slow[strlen(name)] == ':') {
    int ms = atoi(slow + strlen(name) + 1);
    struct timespec wait = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&wait, NULL);
  }
  const char* gpu = getenv("FAKE_BENCH_GPU");
  printf("{\"event\":\"system\",\"gpu\":\"%s\",\"sm_count\":4,\"cc\":\"0.0\",\"cuda_runtime\":13000,"
         "\"cuda_driver\":13000,\"cudnn_version\":91900,\"cublas_version\":130100,\"fake\":true}\n",
         gpu ? gpu : "Fake GPU");
  fflush(stdout);
  if (!serve) {
    run_wanted(l2, plan_threads, max_engines);
    return 0;
  }
  char line[1 << 16];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = '\0';
    memset(wanted, 0, sizeof wanted);
    if (parse_jobs(line) != 0) {
      printf("{\"event\":\"error\",\"message\":\"--serve: not job ranges\"}\n");
    } else {
      run_wanted(l2, plan_threads, max_engines);
    }
    printf("{\"event\":\"ready\"}\n");
    fflush(stdout);
  }
  return 0;
}

static void run_wanted(const char* l2, int plan_threads, int max_engines) {
  for (int i = 0; i < MAX_JOBS; ++i) {
    if (!wanted[i] || !plan[i].defined) continue;
    const struct job* j = &plan[i];
    const char* b = j->behaviour;
    if (strcmp(b, "skip") == 0) continue;
    if (strcmp(b, "badstart") == 0) {
      printf("{\"event\":\"start\",\"job\":[%d]}\n", i);
      fflush(stdout);
    }
    printf("{\"event\":\"start\",\"job\":%d}\n", i);
    fflush(stdout);
    if (is_bad_result(b)) bad_result(i, j, b, l2);
    if (strcmp(b, "partial") == 0) {
      printf("{\"event\":\"result\",\"job\":%d,\"layer_key\":\"%s\",\"median_ms\":0.", i, j->layer_key);
      fflush(stdout);
      exit(0);
    }
    if (strcmp(b, "fork") == 0 && fork() == 0) {
      note_pid();
      sleep_ms(3600 * 1000L);
      _exit(0);
    }
    if (strcmp(b, "slow") == 0) sleep_ms(150);
    if (strcmp(b, "garbage") == 0) {
      printf("### cuDNN says hello, this is not JSON\n");
      fflush(stdout);
    }
    if (strcmp(b, "badevent") == 0) {
      printf("{\"event\":\"bogus\",\"job\":%d}\n", i);
      fflush(stdout);
    }
    for (int a = 0; a < j->n_algorithms; ++a) {
      if (strcmp(b, "steady") == 0) sleep_ms(600);
      const char* status = (strcmp(b, "mixed") == 0 && a % 2 == 1) ? "not_supported" : "ok";
      result(i, j, a, status, l2);
      if (a == 0 && strcmp(b, "segv") == 0) raise(SIGSEGV);
      if (a == 0 && strcmp(b, "hang") == 0) sleep_ms(3600 * 1000L);
      if (a == 0 && (strcmp(b, "error") == 0 || strcmp(b, "sticky") == 0)) {
        printf("{\"event\":\"error\",\"job\":%d,\"message\":\"CUDA context lost: cudaErrorIllegalAddress\"}\n", i);
        fflush(stdout);
        if (strcmp(b, "sticky") == 0) exit(3);
      }
      if (a == 0 && strcmp(b, "exit") == 0) {
        fprintf(stderr, "fake failure in job %d\n", i);
        exit(3);
      }
    }
    char told[96] = "";  /* the options tests look for, told back as phases */
    if (plan_threads >= 0) snprintf(told, sizeof told, "\"plan_threads\":%d", plan_threads);
    if (max_engines >= 0)
      snprintf(told + strlen(told), sizeof told - strlen(told), "%s\"max_engines\":%d", told[0] ? "," : "", max_engines);
    if (told[0]) {
      printf("{\"event\":\"end\",\"job\":%d,\"phases_ms\":{%s}}\n", i, told);
    } else {
      printf("{\"event\":\"end\",\"job\":%d}\n", i);
    }
    fflush(stdout);
    if (strcmp(b, "endhang") == 0) sleep_ms(3600 * 1000L);
  }
}
