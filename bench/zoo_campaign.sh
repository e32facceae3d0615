#!/usr/bin/env bash
# The shipped database's campaign on one H100 (docs/RESULTS.md §7), in steps that fit calls of
# a few minutes each; every step resumes (generate leaves unchanged files alone, the build is
# incremental, the runner skips the jobs the database holds). Run from the repository root:
#
#   bench/zoo_campaign.sh prepare RESULTS_DIR     # zoo models, generate + build the zoo project (timed),
#                                                 # the bundles' projects built in the background
#   bench/zoo_campaign.sh sample RESULTS_DIR N     # every N-th job of each executable, with the whole
#                                                 # campaign's wall estimated from it (its rows count)
#   bench/zoo_campaign.sh run RESULTS_DIR SECONDS  # bench/campaign.py on the zoo project for about SECONDS
#   bench/zoo_campaign.sh profiles RESULTS_DIR    # the shipped bundles' own calls: warm, cold L2, cold weights
#   bench/zoo_campaign.sh race RESULTS_DIR        # bench/race_check.py on the zoo project (RACE_JOBS per exe)
#   bench/zoo_campaign.sh pack RESULTS_DIR        # the database in the shipped form, RESULTS_DIR/h100.columns.xz
#                                                 # (benanza db pack; in parts .0*, 15 MB each, when larger)
#
# The database is out/zoo.db; each step writes its log numbers and JSON into RESULTS_DIR.
set -euo pipefail
step=${1:?step: prepare, run, profiles or pack}
results=${2:?results directory}
mkdir -p "$results" out
py=${PYTHON:-python3}
db=out/zoo.db
zoo=(models/zoo --batch 1,8,64,256 --dtype fp32,tf32,fp16)
bundle_args() { for b in "$@"; do printf -- '--from-profile\n%s\n' "$b"; done; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { printf '%d.%03d' $(( $1 / 1000 )) $(( $1 % 1000 )); }

case "$step" in
prepare)
  [ -f models/zoo/resnet50.onnx ] || $py -m benanza models zoo models/zoo >/dev/null
  t0=$(now_ms)
  $py -m benanza generate "${zoo[@]}" --out out/zoo >/dev/null
  t1=$(now_ms)
  $py -c "from benanza import runner; runner.build('out/zoo')"
  t2=$(now_ms)
  echo "zoo generate $(secs $((t1 - t0))) s, build $(secs $((t2 - t1))) s" | tee -a "$results/walls.txt"
  # the bundles' projects (small) build at low priority while the GPU works, in a session of
  # their own so that they outlive this step's command
  every=$(bundle_args perfdb/bundles/*/ | tr '\n' ' ')
  batch1=$(bundle_args perfdb/bundles/*_b1_*/ | tr '\n' ' ')
  rm -f out/profiles.built
  setsid nohup nice -n 19 bash -c "$py -m benanza generate models/zoo $every --out out/prof >/dev/null &&
    $py -c \"from benanza import runner; runner.build('out/prof', jobs=4)\" &&
    $py -m benanza generate models/zoo $batch1 --out out/cold >/dev/null &&
    $py -c \"from benanza import runner; runner.build('out/cold', jobs=4)\" &&
    touch out/profiles.built" >out/profiles.log 2>&1 &
  echo $! >out/profiles.pid
  ;;
sample)
  every=${3:?every N-th job}
  $py bench/campaign.py out/zoo --db $db --sample "$every" --json "$results/sample_$every.json" --slowest 10 || true
  ;;
race)
  $py bench/race_check.py out/zoo --jobs-per-exe "${RACE_JOBS:-40}" --out "$results/race_check.json" || true
  ;;
run)
  seconds=${3:?seconds}
  shopt -s nullglob; done_runs=("$results"/campaign_*.json); n=${#done_runs[@]}
  $py bench/campaign.py out/zoo --db $db --time-limit "$seconds" --json "$results/campaign_$((n + 1)).json" \
    --slowest 20 || true
  ;;
profiles)
  while [ ! -f out/profiles.built ]; do
    if ! kill -0 "$(cat out/profiles.pid)" 2>/dev/null; then cat out/profiles.log; exit 1; fi
    sleep 2
  done
  for pass in "out/prof warm" "out/cold cold" "out/cold cold-weights"; do
    set -- $pass
    t0=$(now_ms)
    $py -m benanza run "$1" --db $db --l2 "$2" | tail -3
    echo "profiles $1 --l2 $2: $(secs $(( $(now_ms) - t0 ))) s" | tee -a "$results/walls.txt"
  done
  ;;
pack)
  $py -m benanza db info $db
  $py -m benanza db pack $db "$results/h100.columns.xz"
  if [ "$(stat -c %s "$results/h100.columns.xz")" -gt 15728640 ]; then  # the device returns files of <= 16 MB
    split -b 15M -d "$results/h100.columns.xz" "$results/h100.columns.xz." && rm "$results/h100.columns.xz"
  fi
  ls -l "$results"/h100.columns.xz*
  ;;
*)
  echo "unknown step $step" >&2
  exit 2
  ;;
esac
